#!/usr/bin/env bash
# The main job: Demeter tuning a real Flink job live, on this machine. Installs Flink 2.3 into
# .lab/ from PyPI on first use (~330 MB), builds Demeter and the benchmark job, starts a Flink
# JobManager, a Demeter agent (which runs the TaskManagers on the coordinator's orders) and the
# coordinator daemon, registers the benchmark job fed by a real workload trace compressed from
# 18 hours to DURATION, deploys it at the static peak configuration, and lets the policy tune
# it: forecast, profiling copies beside production, savepoint-safe reconfigurations. A live view
# shows rate vs forecast, the configuration and the decisions with their reasons; at the end a
# summary compares what was allocated with the static configuration, the job is stopped with a
# savepoint and its output is checked exactly-once.
#
#   scripts/run-local.sh                          demeter, 20 minutes (one compressed day)
#   DURATION=600 scripts/run-local.sh             10 minutes (the trace is compressed to fit)
#   POLICY=static scripts/run-local.sh            the comparison run: never changes anything
#   TRACE=data/traces/ADS_3D_1S_4_sub_30K_max.csv scripts/run-local.sh
#   WORK_US=1000 PEAK_RATE=900 …                  heavier records / a higher peak (defaults 500, 900:
#                                                 sized for 2 cores)
#   MAX_COPIES=2 …                                profiling copies per batch (default 1 on ≤ 2 cores)
#   NO_VIEW=1 …                                   log lines instead of the full-screen view (CI)
#   LOG=info,demeter_coordinator::policy=debug …  the coordinator's log filter
#   UNTIL_TUNED=1 …                               end as soon as a profiling batch measured a copy
#                                                 and a reconfiguration was applied (DURATION caps it)
# Tests set BIN_DIR (prebuilt binaries: no release build), RUN_DIR, CLUSTER, REST_PORT, RPC_PORT,
# DEMETER_PORT and PROFILE_PORT (first REST port of the copies; RPC ports 2000 lower).
#
# Ctrl-C stops early (the summary and the exactly-once check still run). Everything it starts
# is stopped at the end; logs and the decision log stay in .lab/demeter-local/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
lab=${DEMETER_LAB:-$root/.lab}
export DEMETER_LAB=$lab
run=${RUN_DIR:-$lab/demeter-local}
cluster=${CLUSTER:-demo}
profile_port=${PROFILE_PORT:-18700}
duration=${DURATION:-1200}
policy=${POLICY:-demeter}
trace=${TRACE:-$root/data/traces/CARS_3D_1S_4_sub_35K_max.csv}
rest_port=${REST_PORT:-8081}
rpc_port=${RPC_PORT:-6123}
port=${DEMETER_PORT:-7443}
# The benchmark's window operator spins WORK_US µs per record: ~1e6/WORK_US records/s per
# subtask. PEAK_RATE and WORK_US keep the busiest minute within what a 2-core machine can give
# the job beside the JobManager, Demeter and one profiling copy: at 1 ms per record, production
# alone took most of the 2 cores at the peak, and every profiling batch was recalled.
work_us=${WORK_US:-500}
peak_rate=${PEAK_RATE:-900}
# Profiling copies per batch: every copy starts a JobManager and TaskManagers, CPU-bound JVM
# start-ups that production pays for in latency on a small machine.
max_copies=${MAX_COPIES:-$(( $(nproc) <= 2 ? 1 : 2 ))}
bin=${BIN_DIR:-$root/target/release}
rows=$(($(wc -l <"$trace") - 1))
speedup=$(python3 -c "print(round($rows / $duration, 3))")
peak=$(python3 -c "import sys; print(max(int(l.split('|')[1]) for l in open(sys.argv[1]) if l[0].isdigit()))" "$trace")
scale=$(python3 -c "print(round($peak_rate / $peak, 6))")
factor=$(python3 -c "print(round(max(1.0, $speedup), 3))")

say() { printf '==> %s\n' "$*"; }
if ss -Hulnp 2>/dev/null | grep -q "[:.]$port "; then
  echo "UDP port $port is in use (another Demeter coordinator?); stop it or set DEMETER_PORT" >&2
  exit 1
fi
say "Demeter on a real local Flink: policy $policy, $(basename "$trace") ($rows s) replayed in ${duration} s (×$speedup), peak $peak_rate records/s"

say "building Demeter (release) and the benchmark job"
[ -n "${BIN_DIR:-}" ] || cargo build --release --workspace --bins --quiet
scripts/flink-lab.sh install >/dev/null
jar=$(scripts/build-job.sh | tail -n 1)

rm -rf "$run"
mkdir -p "$run"
say "cluster CA and certificates in $run/pki"
"$bin/demeter-coordinator" certs init --dir "$run/pki" --cluster local >/dev/null
for n in coordinator:coordinator node1:agent operator:cli; do
  "$bin/demeter-coordinator" certs issue --dir "$run/pki" --name "${n%%:*}" --role "${n##*:}" >/dev/null
done

pids=()
job_id=
stop_all() {
  trap - EXIT INT TERM
  echo
  if [ -n "${summary_done:-}" ]; then :; else summary || true; fi
  say "stopping Demeter and Flink"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/flink-lab.sh stop "$cluster" >/dev/null 2>&1 || true
  echo "logs: $run/{coordinator,agent}.log; Flink: $lab/clusters/$cluster/log"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

say "Flink JobManager (REST $rest_port); the agent runs the TaskManagers"
scripts/flink-lab.sh stop "$cluster" >/dev/null 2>&1 || true
scripts/flink-lab.sh start "$cluster" --rest-port "$rest_port" --rpc-port "$rpc_port" --taskmanagers 0 >/dev/null
eval "$(scripts/flink-lab.sh env "$cluster")"

cat >"$run/space.toml" <<TOML
# What Demeter may choose from on this small machine.
parallelism = [1, 2, 3]
slots_per_tm = [1, 2]
tm_memory_mb = [1024, 1280]
tm_cpu_millis = [1000]
checkpoint_interval_s = [5, 10]
max_parallelism = 128
max_task_managers = 3
min_memory_per_slot_mb = 256
max_rate = $((peak_rate * 2))
TOML

cat >"$run/agent.toml" <<TOML
coordinator = "127.0.0.1:$port"
log = "info,quinn=warn"
[tls]
ca = "$run/pki/ca.pem"
cert = "$run/pki/node1.pem"
key = "$run/pki/node1.key"
[sampling]
interval_ms = 1000
[supervisor]
backend = "child"
[supervisor.clusters.$cluster]
flink_home = "$FLINK_HOME"
conf_dir = "$FLINK_CONF_DIR"
log_dir = "$FLINK_LOG_DIR"
pid_dir = "$FLINK_PID_DIR"
TOML

# The policy's clock knobs are for a real day; the trace runs ×$speedup faster, so they are
# compressed by the same factor, with floors for what does not compress: a restart still takes
# tens of real seconds, so a move must pay for that over a dwell of minutes, not seconds.
python3 - "$factor" "$max_copies" >"$run/demeter.toml" <<'PY'
import sys
f = float(sys.argv[1])
copies = int(sys.argv[2])
def c(seconds, floor):
    return max(floor, int(round(seconds / f)))
knobs = {
    "risk_check_every_s": c(60, 10), "optimise_every_s": c(600, 45),
    "first_decision_after_s": c(180, 45), "horizon_s": c(3600, 120),
    "risk_horizon_s": c(300, 60), "peak_memory_s": c(86400, 600),
    "min_dwell_s": c(3600, 90), "dwell_after_risk_s": c(2400, 60), "expected_dwell_s": c(3600, 600),
    "shape_dwell_s": c(14400, 1200), "risk_cooldown_s": c(300, 30),
    "min_profile_gap_s": c(900, 120), "profile_run_s": 150,
    "profile_cpu_share": 0.3, "profile_burst_h": 0.2, "max_copies": copies,
    # One window per ~20 s: the policy's memory needs 10 one-second ticks per window, and the
    # compressed rate moves faster than a real one, hence the wider rate band too.
    "window_s": 20, "window_rate_change": 0.25, "full_refit_every_s": c(10800, 120),
}
for k, v in knobs.items():
    print(f"{k} = {v}")
PY

cat >"$run/coordinator.toml" <<TOML
listen = "127.0.0.1:$port"
store = "$run/coordinator.redb"
log = "${LOG:-info,quinn=warn}"
[tls]
ca = "$run/pki/ca.pem"
cert = "$run/pki/coordinator.pem"
key = "$run/pki/coordinator.key"
[flink]
rest_url = "http://127.0.0.1:$rest_port"
[executor]
cluster = "$cluster"
agents = ["node1"]
resume_wait_secs = 60
[[tuning.jobs]]
job = "bench"
policy = "$policy"
period_secs = 1
latency_metric = "window.latencyP95Ms"
offered_rate_metric = "Source__generator.targetRateTotal"
record_ticks = "$run/ticks.jsonl"
[tuning.jobs.demeter]
$(cat "$run/demeter.toml")
[tuning.jobs.profiling]
args = "--rate {rate} --work-us $work_us --sink discard"
flink_home = "$FLINK_HOME"
work_dir = "$run/profiling"
rest_ports = { first = $profile_port, count = 10 }
rpc_ports = { first = $((profile_port - 2000)), count = 10 }
cap = { cpu_cores = 4.0, memory_mb = 6144.0 }
host_reserve_mb = 1024
# The copies' TaskManagers run through the agent, like production's. On a 2-core demo machine
# idle CPU says little (production and the copies' start-up take turns), so place by memory;
# the cap and the TaskManagers' CPU limits bound the copies' CPU.
copies_on = "agents"
node_reserve = { cpu_cores = 0.0, memory_mb = 1024.0 }
node_cpu_check = false
warmup_secs = ${PROFILE_WARMUP:-30}
measure_secs = ${PROFILE_MEASURE:-30}
max_recovery_secs = 60
TOML

say "starting the coordinator and the agent"
# Own sessions: a terminal's Ctrl-C goes to the whole foreground group, and the daemons handle
# SIGINT by shutting down, but the summary after a Ctrl-C still needs the coordinator (and the
# agent's TaskManagers keep the job running until its savepoint). stop_all stops them.
setsid "$bin/demeter-coordinator" run --config "$run/coordinator.toml" >>"$run/coordinator.log" 2>&1 &
pids+=($!)
setsid "$bin/demeter-agent" --config "$run/agent.toml" >>"$run/agent.log" 2>&1 &
pids+=($!)
cli() {
  "$bin/demeter-coordinator" job --coordinator "127.0.0.1:$port" --ca "$run/pki/ca.pem" \
    --cert "$run/pki/operator.pem" --key "$run/pki/operator.key" "$@"
}
for _ in $(seq 1 60); do
  grep -q "agents connected" "$run/coordinator.log" 2>/dev/null && break
  sleep 1
done

summary() {
  summary_done=1
  say "summary"
  cli tuning bench --last 100 || true
  cli tuning bench --json --last 100 >"$run/tuning.json" 2>/dev/null || return 0
  python3 - "$run/tuning.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
live = v.get("live") or {}
t = live.get("totals") or {}
obs = t.get("observed_s") or 0
if obs:
    # The static peak configuration: 3 TaskManagers × 1 core × 1280 MiB, all the time.
    # Profiling copies' TaskManagers count against Demeter (the copies' JobManagers do not,
    # as production's does not).
    static_cpu, static_mem = 3.0 * obs, 3 * 1280 / 1024 * obs
    cpu = t['cpu_core_s'] + t.get('profiling_cpu_core_s', 0)
    mem = t['memory_gib_s'] + t.get('profiling_memory_gib_s', 0)
    print(f"\nover {obs:.0f} s: CPU allocated {cpu / static_cpu:.3f} × static, "
          f"memory {mem / static_mem:.3f} × static (profiling included; production alone "
          f"{t['cpu_core_s'] / static_cpu:.3f} and {t['memory_gib_s'] / static_mem:.3f}); "
          f"{100 * t['over_qos_s'] / obs:.1f} % of seconds over the 1000 ms p95 QoS, "
          f"{100 * t['down_s'] / obs:.1f} % down; {t['reconfigurations']} reconfigurations, "
          f"{t['profiling_batches']} profiling batches")
PY
  job_id=$(curl -s "http://127.0.0.1:$rest_port/jobs/overview" | python3 -c \
    "import json,sys; print(next((j['jid'] for j in json.load(sys.stdin)['jobs'] if j['state']=='RUNNING'), ''))")
  if [ -n "$job_id" ]; then
    say "stopping the job with a savepoint and checking its output exactly-once"
    # The daemon would bring a stopped job back: stop it first.
    kill -TERM "${pids[0]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    stop_ms=$(($(date +%s%N) / 1000000))
    trigger=$(curl -s -X POST -H 'Content-Type: application/json' -d '{"drain": false}' \
      "http://127.0.0.1:$rest_port/jobs/$job_id/stop" | python3 -c "import json,sys; print(json.load(sys.stdin)['request-id'])")
    for _ in $(seq 1 60); do
      state=$(curl -s "http://127.0.0.1:$rest_port/jobs/$job_id/savepoints/$trigger" | python3 -c \
        "import json,sys; print(json.load(sys.stdin)['status']['id'])")
      [ "$state" = COMPLETED ] && break
      sleep 1
    done
    python3 scripts/check-exactly-once.py "$run/out" >"$run/exactly-once.json" || true
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(('exactly-once: ' if r['ok'] else 'NOT exactly-once: ') + f\"{r.get('distinct', 0)} records, {r.get('missing', '?')} missing, {r.get('duplicates', '?')} duplicated\")" "$run/exactly-once.json"
    # The source keeps a backlog: whatever was due between the deployment and the stop is in the
    # output, except what sat in windows still open then, whatever Demeter's changes cost.
    python3 - "$run/exactly-once.json" "$trace" "$speedup" "$scale" "$t0" "$started_ms" "$stop_ms" <<'PY'
import json, sys
result, trace, speedup, scale, t0, started, stop = sys.argv[1:]
rows = [round(float(l.split("|")[1])) for l in open(trace).read().splitlines()[1:] if "|" in l]
def due_by(ms):
    elapsed = max(0.0, (int(ms) - int(t0)) / 1000 * float(speedup))
    whole = int(elapsed)
    return (sum(rows[i % len(rows)] for i in range(whole)) + (elapsed - whole) * rows[whole % len(rows)]) * float(scale) / float(speedup)
due = due_by(stop) - due_by(started)
distinct = json.load(open(result)).get("distinct", 0)
json.dump({"due": round(due), "committed": distinct}, open(result.replace("exactly-once.json", "due.json"), "w"))
print(f"committed {distinct} of the {due:.0f} records due by the stop ({100 * distinct / max(due, 1):.1f} %)")
PY
  fi
}

say "registering the benchmark job and deploying it at the static peak configuration"
t0=$(($(date +%s) * 1000))
cli register --name bench --jar "$jar" --entry-class io.demeter.bench.BenchJob \
  --qos-latency-ms 1000 --qos-recovery-s 120 --space "$run/space.toml" \
  --args --trace "$trace" --trace-speedup "$speedup" --rate-scale "$scale" --t0 "$t0" \
  --work-us "$work_us" --sink file --output "file://$run/out" >/dev/null
cli apply --name bench --parallelism 3 --slots 1 --tm-memory 1280m --tm-cpu 1 --checkpoint-interval 10s
# The source's queue starts when the job first runs (its deployment is no backlog).
started_ms=$(($(date +%s%N) / 1000000))

say "tuning for $duration s; live view every 5 s (Ctrl-C ends early)"
tuned() {
  cli tuning bench --json --last 100 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["decisions"]
measured = any(x["action"].startswith("profile") and (x["outcome"] or "").split(" ")[0] not in ("", "0", "failed:", "no") for x in d)
moved = any(x["action"].startswith("reconfigure") and (x["outcome"] or "").startswith("applied") for x in d)
sys.exit(0 if measured and moved else 1)'
}
deadline=$(($(date +%s) + duration))
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ -n "${UNTIL_TUNED:-}" ] && tuned; then
    say "profiled and reconfigured: ending early (UNTIL_TUNED); 20 s more to see the job run after the move"
    sleep 20
    break
  fi
  if [ "${NO_VIEW:-0}" = 1 ] || [ ! -t 1 ]; then
    cli tuning bench --last 3 | sed -n '1,4p' | tr -s ' ' | paste -sd ' ' | cut -c1-240
    sleep 15
  else
    view=$(cli tuning bench --last 6 2>&1 || true)
    printf '\033[2J\033[H%s\n\n(%s s left; Ctrl-C ends early)\n' "$view" "$((deadline - $(date +%s)))"
    sleep 5
  fi
done
