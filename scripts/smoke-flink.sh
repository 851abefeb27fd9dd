#!/usr/bin/env bash
# smoke-flink.sh — end-to-end check of the Flink lab and the benchmark job, all through REST:
# install → build job → start a cluster (2 TMs × 2 slots) → upload and run the job at a fixed
# rate (p=2) → wait RUNNING and records flowing → read latencyP95Ms and numRecordsInPerSecond →
# stop-with-savepoint → rerun from it at p=3 → run → stop-with-savepoint (drain false) →
# check-exactly-once.py → stop the cluster. Prints timings; writes them, the vertex list and the
# job's metric names to <lab>/smoke/.
#
# Env: SMOKE_CLUSTER (default smoke), SMOKE_REST_PORT (28081), SMOKE_RPC_PORT (26123),
# SMOKE_RATE (2000 rec/s), SMOKE_RUN_S (seconds per run, 30), SMOKE_KEEP=1 keeps the cluster,
# SMOKE_FAILOVER=0 skips the extra step that kill -9s a TaskManager during the p=3 run (and starts
# a replacement), DEMETER_LAB (lab dir). Exit 0 only when every step passed and the output is
# exactly-once.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB=${DEMETER_LAB:-$(dirname "$here")/.lab}
export DEMETER_LAB=$LAB
NAME=${SMOKE_CLUSTER:-smoke}
REST_PORT=${SMOKE_REST_PORT:-28081}
RPC_PORT=${SMOKE_RPC_PORT:-26123}
RATE=${SMOKE_RATE:-2000}
RUN_S=${SMOKE_RUN_S:-30}
R=http://127.0.0.1:$REST_PORT
SMOKE_DIR=$LAB/smoke
timings=()

say() { printf '[smoke %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }
took() { timings+=("$1=$2"); say "$1: $2 s"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
# json EXPR: evaluate a python expression over the JSON document on stdin (bound to d).
json() { python3 -c "import json,sys; d=json.load(sys.stdin); r=($1); print(r if not isinstance(r,(dict,list)) else json.dumps(r))"; }
get() { curl -sf --max-time 10 "$R$1"; }
post() { curl -sf --max-time 30 -X POST -H 'Content-Type: application/json' "$R$1" -d "$2"; }

cleanup() {
  local rc=$?
  if [[ ${SMOKE_KEEP:-0} != 1 ]]; then "$here/flink-lab.sh" stop "$NAME" || true; fi
  if ((rc == 0)); then say "PASSED"; else say "exit code $rc"; fi
}
trap cleanup EXIT

wait_until() { # description timeout_s command...
  local what=$1 limit=$2 start=$SECONDS
  shift 2
  until "$@"; do
    ((SECONDS - start < limit)) || die "timed out after ${limit} s waiting for $what"
    (((SECONDS - start) % 10 == 0)) && say "waiting for $what ($((SECONDS - start)) s)"
    sleep 0.5
  done
}

job_running() { # job: job RUNNING and every vertex RUNNING
  get "/jobs/$1" | json "d['state'] == 'RUNNING' and all(v['status'] == 'RUNNING' for v in d['vertices'])" | grep -q True
}
job_state() { get "/jobs/$1" | json "d['state']"; }
vertex_id() { get "/jobs/$1" | json "[v['id'] for v in d['vertices'] if v['name'].startswith('$2')][0]"; }
# Sum over subtasks of a vertex metric; the JM refreshes lazily, so prime, wait, read.
vertex_sum() {
  get "/jobs/$1/vertices/$2/subtasks/metrics?get=$3&agg=sum,max" >/dev/null
  sleep 1.2
  get "/jobs/$1/vertices/$2/subtasks/metrics?get=$3&agg=sum,max" | json "{m['id']: m for m in d}['$3']['${4:-sum}']"
}
records_flowing() { # job source_vertex minimum
  local out
  out=$(vertex_sum "$1" "$2" numRecordsOut 2>/dev/null) || return 1
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$out" "$3"
}
# After a restart the JM may still hold the failed attempts' counters: wait for them to grow.
records_advancing() { # job source_vertex
  local before
  before=$(vertex_sum "$1" "$2" numRecordsOut 2>/dev/null) || return 1
  sleep 2
  records_flowing "$1" "$2" "$(python3 -c "import sys; print(float(sys.argv[1]) + 1)" "$before")"
}
restarts() { get "/jobs/$1/metrics?get=numRestarts" | json "int(float(d[0]['value']))"; }
restarted() { (($(restarts "$1") > $2)); }

run_job() { # parallelism [savepoint] -> job id
  local body
  body=$(python3 - "$JAR_ID" "$1" "${2:-}" "$RATE" "$OUTPUT" "$T0" <<'EOF'
import json, sys
jar, parallelism, savepoint, rate, output, t0 = sys.argv[1:]
body = {"entryClass": "io.demeter.bench.BenchJob", "parallelism": int(parallelism),
        "programArgsList": ["--rate", rate, "--t0", t0, "--keys", "100", "--window-ms", "2000",
                            "--work-us", "50", "--checkpoint-ms", "3000",
                            "--sink", "file", "--output", "file://" + output]}
if savepoint:
    body.update(savepointPath=savepoint, allowNonRestoredState=False)
print(json.dumps(body))
EOF
)
  post "/jars/$JAR_ID/run" "$body" | json "d['jobid']"
}

stop_with_savepoint() { # job -> savepoint location
  local trigger status location
  trigger=$(post "/jobs/$1/stop" "{\"targetDirectory\":\"file://$LAB/clusters/$NAME/savepoints\",\"drain\":false,\"formatType\":\"CANONICAL\"}" |
    json "d['request-id']")
  for _ in $(seq 1 240); do
    status=$(get "/jobs/$1/savepoints/$trigger")
    case $(json "d['status']['id']" <<<"$status") in
      COMPLETED)
        location=$(json "d['operation'].get('location', '')" <<<"$status")
        [[ -n $location ]] || die "savepoint failed: $(json "d['operation']" <<<"$status")"
        echo "$location"
        return ;;
    esac
    sleep 0.25
  done
  die "stop-with-savepoint of $1 did not complete in 60 s"
}

t=$(now); "$here/flink-lab.sh" install >/dev/null; took install "$(since "$t")"
t=$(now); JAR=$("$here/build-job.sh"); took build_job "$(since "$t")"
t=$(now)
"$here/flink-lab.sh" start "$NAME" --rest-port "$REST_PORT" --rpc-port "$RPC_PORT" --taskmanagers 2 --slots 2 >/dev/null
took cluster_start "$(since "$t")"

OUTPUT=$SMOKE_DIR/output-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUTPUT"
JAR_ID=$(curl -sf -X POST -H "Expect:" -F "jarfile=@$JAR" "$R/jars/upload" | json "d['filename'].split('/')[-1]")
say "uploaded $JAR_ID; output $OUTPUT"

# One timetable for every run: what was due while the job was stopped is emitted after the
# restore (the source keeps a backlog), so the output must hold RATE records per second since T0.
T0=$(( $(date +%s%N) / 1000000 ))
t=$(now); JOB1=$(run_job 2)
wait_until "job $JOB1 RUNNING" 120 job_running "$JOB1"
took submit_to_running_p2 "$(since "$t")"
SRC=$(vertex_id "$JOB1" "Source: generator"); WIN=$(vertex_id "$JOB1" "window")
wait_until "records flowing" 60 records_flowing "$JOB1" "$SRC" 100
took submit_to_records_p2 "$(since "$t")"
say "running $RUN_S s at $RATE rec/s"
sleep "$RUN_S"

get "/jobs/$JOB1" | json "[(v['id'], v['name'], v['parallelism']) for v in d['vertices']]" >"$SMOKE_DIR/vertices.json"
get "/jobs/$JOB1/vertices/$SRC/metrics" | json "sorted(m['id'] for m in d)" >"$SMOKE_DIR/source-metric-names.json"
get "/jobs/$JOB1/vertices/$WIN/metrics" | json "sorted(m['id'] for m in d)" >"$SMOKE_DIR/window-metric-names.json"
P95=$(vertex_sum "$JOB1" "$WIN" window.latencyP95Ms max)
IN_RATE=$(vertex_sum "$JOB1" "$WIN" numRecordsInPerSecond)
OUT1=$(vertex_sum "$JOB1" "$SRC" numRecordsOut)
say "p=2: window.latencyP95Ms max=$P95 ms, window numRecordsInPerSecond sum=$IN_RATE, source numRecordsOut=$OUT1"
[[ $P95 != nan && $P95 != NaN ]] || die "latencyP95Ms is not reported"

t=$(now); SP1=$(stop_with_savepoint "$JOB1"); took stop_with_savepoint "$(since "$t")"
say "savepoint $SP1"
wait_until "job $JOB1 FINISHED" 60 bash -c "[[ \$(curl -sf $R/jobs/$JOB1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])') == FINISHED ]]"
JOB2=$(run_job 3 "$SP1")
wait_until "job $JOB2 RUNNING" 120 job_running "$JOB2"
took stop_to_running_p3 "$(since "$t")"
wait_until "records flowing after restore" 60 records_flowing "$JOB2" "$SRC" 100
took stop_to_records_p3 "$(since "$t")"
BACKLOG=$(vertex_sum "$JOB2" "$SRC" Source__generator.pendingRecords)
say "backlog right after the restore: $BACKLOG records (due while the job was stopped)"
get "/jobs/$JOB2/checkpoints" | json "d['latest']['restored']" >"$SMOKE_DIR/restored.json"
say "restored: $(cat "$SMOKE_DIR/restored.json")"
sleep "$RUN_S"

if [[ ${SMOKE_FAILOVER:-1} == 1 ]]; then
  # A real failure: the job restores from its latest checkpoint, not from a savepoint.
  tm_pids=$(ls "$LAB/clusters/$NAME/pid/"*taskexecutor.pid)
  victim=$(head -n 1 "$tm_pids")
  before=$(restarts "$JOB2")
  say "kill -9 TaskManager $victim and start a replacement"
  t=$(now)
  kill -9 "$victim"
  sed -i "/^$victim\$/d" "$tm_pids"
  # shellcheck disable=SC1090
  (source <("$here/flink-lab.sh" env "$NAME") && "$FLINK_HOME/bin/taskmanager.sh" start >/dev/null)
  wait_until "job $JOB2 to restart" 120 restarted "$JOB2" "$before"
  wait_until "job $JOB2 RUNNING after the failure" 180 job_running "$JOB2"
  wait_until "records flowing after the failure" 60 records_advancing "$JOB2" "$SRC"
  took kill_to_records "$(since "$t")"
  say "after the failure: numRestarts $(restarts "$JOB2"), parallelism $(get "/jobs/$JOB2" | json "[v['parallelism'] for v in d['vertices']]"), restored $(get "/jobs/$JOB2/checkpoints" | json "d['latest']['restored']")"
  sleep "$RUN_S"
fi
SHARE=$(vertex_sum "$JOB2" "$SRC" Source__generator.rateShare)
TARGET=$(vertex_sum "$JOB2" "$SRC" Source__generator.targetRateTotal max)
P95=$(vertex_sum "$JOB2" "$WIN" window.latencyP95Ms max)
IN_RATE=$(vertex_sum "$JOB2" "$WIN" numRecordsInPerSecond)
OUT2=$(vertex_sum "$JOB2" "$SRC" numRecordsOut)
say "p=3: rateShare sum=$SHARE, targetRateTotal=$TARGET, latencyP95Ms max=$P95, numRecordsInPerSecond sum=$IN_RATE, source numRecordsOut=$OUT2"
python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - 1) < 1e-6 else 1)" "$SHARE" ||
  die "source shares after the restore sum to $SHARE, not 1"

LEFT=$(vertex_sum "$JOB2" "$SRC" Source__generator.pendingRecords)
STOP_MS=$(( $(date +%s%N) / 1000000 ))
t=$(now); SP2=$(stop_with_savepoint "$JOB2"); took final_stop_with_savepoint "$(since "$t")"
say "final savepoint $SP2"
wait_until "job $JOB2 FINISHED" 60 bash -c "[[ \$(curl -sf $R/jobs/$JOB2 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])') == FINISHED ]]"

# Both runs emitted OUT1 + OUT2 records; all but the last open windows must be committed.
MIN=$(python3 -c "import sys; print(int((float(sys.argv[1]) + float(sys.argv[2])) * 0.8))" "$OUT1" "$OUT2")
say "checking exactly-once (at least $MIN of $OUT1 + $OUT2 emitted records committed)"
python3 "$here/check-exactly-once.py" "$OUTPUT" --splits 2 --min-records "$MIN" | tee "$SMOKE_DIR/check.json" |
  json "{k: d.get(k) for k in ('ok', 'committed_files', 'ignored_files', 'records', 'distinct', 'missing', 'duplicates')}" >&2
json "d['ok']" <"$SMOKE_DIR/check.json" | grep -q True || die "exactly-once check failed: $SMOKE_DIR/check.json"
# Without a replayed backlog the stop, the restart and the failure would each cost their
# duration × RATE records (a quarter of the run); open windows at the final stop cost seconds.
DUE=$(python3 -c "import sys; print(int(float(sys.argv[1]) * (int(sys.argv[2]) - int(sys.argv[3])) / 1000))" "$RATE" "$STOP_MS" "$T0")
DISTINCT=$(json "d['distinct']" <"$SMOKE_DIR/check.json")
say "due since T0: $DUE records; committed: $DISTINCT; backlog just before the final stop: $LEFT"
python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) >= 0.9 * float(sys.argv[1]) else 1)" "$DUE" "$DISTINCT" ||
  die "only $DISTINCT of $DUE due records were committed: the backlog was not replayed"

printf '%s\n' "${timings[@]}" | tee "$SMOKE_DIR/timings.txt"
