# shellcheck shell=bash
# shellcheck disable=SC2154 # $root and $rest are flink-units.sh's
# Sourced by flink-units.sh once both TaskManager units run: the benchmark job on them, one
# unit SIGKILLed, and what systemd and Flink make of it. Uses its $root, $rest, in_ct,
# registered and check.

rest_url="http://127.0.0.1:$rest"
json() { # json EXPR: evaluates EXPR over the JSON document on stdin (as d)
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}
get() { curl -fsS --max-time 5 "$rest_url$1"; }
post() { curl -fsS --max-time 30 -X POST -H 'Content-Type: application/json' -d "$2" "$rest_url$1"; }
within() { # within SECONDS COMMAND...: polls COMMAND every 0.5 s
    local tries=$(($1 * 2))
    shift
    for _ in $(seq "$tries"); do
        "$@" 2>/dev/null && return 0
        sleep 0.5
    done
    return 1
}

out=/var/lib/flink/out
jar=$(DEMETER_LAB="$OPS_REPO/.lab" "$OPS_REPO/scripts/build-job.sh" 2>"$OPS_LAB/flink-units-job-build.log" | tail -n 1)
[ -f "$jar" ] || { tail -20 "$OPS_LAB/flink-units-job-build.log"; say "  FAIL  the benchmark job did not build"; ops_finish flink-units; }
jar_id=$(curl -fsS --max-time 60 -X POST -F "jarfile=@$jar" "$rest_url/jars/upload" | json 'd["filename"].split("/")[-1]')
# Small and slow enough for two one-slot TaskManagers beside the rest of CI: 200 records/s,
# 1-s windows, checkpoints every second so the output commits often.
args='["--rate", "200", "--keys", "50", "--window-ms", "1000", "--checkpoint-ms", "1000", "--sink", "file", "--output", "'$out'"]'
job=$(post "/jars/$jar_id/run" '{"entryClass": "io.demeter.bench.BenchJob", "parallelism": 2, "programArgsList": '"$args"'}' |
    json 'd["jobid"]')
say "  job $job"

runs_at() { # runs_at P: the job runs, every vertex at parallelism P and RUNNING
    get "/jobs/$job" | json 'd["state"] == "RUNNING" and all(v["status"] == "RUNNING" and v["parallelism"] == '"$1"' for v in d["vertices"])' | grep -qx True
}
completed() { get "/jobs/$job/checkpoints" | json 'd["counts"]["completed"]'; }
completed_over() { [ "$(completed)" -gt "$1" ]; }
restarts() { get "/jobs/$job/metrics?get=numRestarts" | json 'int(float(d[0]["value"])) if d else 0'; }
unit_restarts() { in_ct systemctl show -p NRestarts --value flink-taskmanager@tm-2.service; }

check "the job runs on both TaskManagers at parallelism 2" within 90 runs_at 2
check "it completes checkpoints" within 60 completed_over 1
before=$(completed)
# The JobManager keeps a dead TaskManager listed until its heartbeat times out (50 s): the new
# process is told apart by its RPC address.
tm2_path() { get /taskmanagers | json '[t["path"] for t in d["taskmanagers"] if t["id"].endswith("-tm-2")][0]'; }
old_path=$(tm2_path)
killed_at=$(date +%s.%N)
in_ct systemctl kill -s SIGKILL flink-taskmanager@tm-2.service
restarted() { [ "$(unit_restarts)" = 1 ] && in_ct systemctl is-active flink-taskmanager@tm-2.service; }
check "systemd restarts the SIGKILLed TaskManager (Restart=on-failure)" within 60 restarted
new_registration() { local p; p=$(tm2_path) && [ -n "$p" ] && [ "$p" != "$old_path" ]; }
check "the new tm-2 registers in the old one's place" within 90 new_registration
check "the JobManager lists two TaskManagers" registered 2
job_restarted() { [ "$(restarts)" -ge 1 ]; }
check "the job restarted (numRestarts ≥ 1)" within 60 job_restarted
check "it runs on both TaskManagers at parallelism 2 again" within 120 runs_at 2
say "  seen back at parallelism 2 $(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$killed_at") s after the kill (RestartSec=5s)"
check "it checkpoints again" within 60 completed_over "$((before + 2))"

savepoint_completed() { get "/jobs/$job/savepoints/$1" | json 'd["status"]["id"]' | grep -qx COMPLETED; }
stopped() { # stop with a savepoint; true once it completed
    local trigger
    trigger=$(post "/jobs/$job/stop" '{"drain": false}' | json 'd["request-id"]') || return 1
    within 60 savepoint_completed "$trigger"
}
check "the job stops with a savepoint" stopped
once() {
    python3 "$OPS_REPO/scripts/check-exactly-once.py" "$root$out" --splits 2 --min-records 1000 >"$OPS_LAB/flink-units-once.json"
}
check "its committed output holds every record exactly once" once
say "  $(json '"%d records, %d missing, %d duplicated" % (d["records"], d["missing"], d["duplicates"])' <"$OPS_LAB/flink-units-once.json" 2>/dev/null)"
