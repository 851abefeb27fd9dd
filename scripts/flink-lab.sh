#!/usr/bin/env bash
# flink-lab.sh — a project-local Apache Flink 2.3.0 lab: install, and standalone session
# clusters on 127.0.0.1 that can run side by side (production + profiling copies).
#
# Lab layout (default <repo>/.lab, git-ignored; override with DEMETER_LAB):
#   <lab>/venv/                          python3.11 venv holding apache-flink(-libraries) 2.3.0
#   <lab>/venv/lib/python3.11/site-packages/pyflink   = FLINK_HOME (bin/, lib/, conf/, ...)
#   <lab>/clusters/NAME/conf/            config.yaml, masters, workers, log4j*  (FLINK_CONF_DIR)
#   <lab>/clusters/NAME/log/             JM/TM logs                             (FLINK_LOG_DIR)
#   <lab>/clusters/NAME/pid/             pid files                              (FLINK_PID_DIR)
#   <lab>/clusters/NAME/{checkpoints,savepoints,tmp,upload}
#   <lab>/clusters/NAME/env              the exports `env NAME` prints
#   <lab>/jobs/demeter-bench.jar         the benchmark job (scripts/build-job.sh)
#
# Ports: REST 8081 and JM RPC 6123 by default; everything else (blob, TM RPC/data) is random.
# Every socket binds 127.0.0.1. Two clusters run side by side when they differ in --rest-port
# and --rpc-port, e.g. `start prod` and `start copy1 --rest-port 8082 --rpc-port 6223`.
# Each cluster has its own pid dir: Flink names pid files without a cluster id, and its stop
# scripts kill whatever those files list.
set -euo pipefail

FLINK_VERSION=2.3.0
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${DEMETER_LAB:-$repo_root/.lab}
VENV=$LAB/venv
FLINK_HOME_DIR=$VENV/lib/python3.11/site-packages/pyflink
WAIT_TIMEOUT=${DEMETER_LAB_TIMEOUT:-180}

usage() {
  cat <<EOF
Usage: $(basename "$0") COMMAND [ARGS]

Commands:
  install                Create the lab (${LAB}) with a python3.11 venv and
                         apache-flink(-libraries)==${FLINK_VERSION} (--no-deps), and record the
                         classes a TaskManager loads into a class-data-sharing archive that
                         every lab TaskManager then maps (starts with 40 % less CPU).
                         Idempotent. Prints FLINK_HOME.
  start NAME [options]   Start the session cluster NAME (if it runs: start only missing
                         TaskManagers) and wait until REST answers and its TaskManagers are
                         registered. Prints the REST URL.
      --rest-port P        REST port (default 8081)
      --rpc-port P         JobManager RPC port (default 6123)
      --taskmanagers N     TaskManagers to start (default 1; 0 = JobManager only, for an agent
                           that starts TaskManagers itself, see 'env')
      --slots S            task slots per TaskManager (default 2)
      --tm-memory SIZE     taskmanager.memory.process.size (default 1g; < ~850m needs smaller
                           metaspace/framework sizes, see shared flink notes)
      --jm-memory SIZE     jobmanager.memory.process.size (default 1g)
      --scheduler KIND     adaptive (default; allows in-place rescale) or default
  stop NAME              Stop the cluster's JobManager and every TaskManager it owns (pid files
                         and any JVM started with its conf dir, e.g. foreground TMs).
  status [NAME]          Processes and REST overview of one or all clusters.
  env NAME               Print 'export FLINK_HOME=… FLINK_CONF_DIR=… FLINK_LOG_DIR=…
                         FLINK_PID_DIR=… FLINK_REST_URL=…' for the cluster; then e.g.
                           \$FLINK_HOME/bin/taskmanager.sh start -D taskmanager.memory.process.size=1280m \\
                             -D taskmanager.numberOfTaskSlots=2
                         or \$FLINK_HOME/bin/taskmanager.sh start-foreground (a supervised child).
  logs NAME [LINES]      Print the last LINES (default 40) lines of each of the cluster's logs.

Environment: DEMETER_LAB (lab dir, default <repo>/.lab), DEMETER_LAB_TIMEOUT (seconds to wait
for a cluster, default 180).
EOF
}

say() { printf '[flink-lab] %s\n' "$*" >&2; }
# A cluster this invocation started and that failed to come up is stopped, not left half-running.
STOP_ON_FAILURE=
die() {
  say "error: $*"
  if [[ -n $STOP_ON_FAILURE ]]; then
    local name=$STOP_ON_FAILURE
    STOP_ON_FAILURE=
    sleep 2 # flink-daemon.sh returns before its background child has exec'd java
    cmd_stop "$name"
  fi
  exit 1
}

installed_marker() { echo "$VENV/.flink-$FLINK_VERSION-complete"; }

cmd_install() {
  mkdir -p "$LAB"
  # One install at a time: the suite installs in the foreground while an operations test
  # (tests/ops/flink-units.sh, in the background) may ask for the same lab.
  exec 9>"$LAB/.install.lock"
  flock 9
  if [[ -f $(installed_marker) && -f $FLINK_HOME_DIR/lib/flink-dist-$FLINK_VERSION.jar ]]; then
    say "Flink $FLINK_VERSION already installed"
    record_cds_archive
    echo "FLINK_HOME=$FLINK_HOME_DIR"
    return
  fi
  command -v java >/dev/null || die "java (17) not found on PATH"
  local py
  py=$(command -v python3.11) || die "python3.11 not found on PATH"
  if [[ ! -x $VENV/bin/python ]]; then
    say "creating venv $VENV"
    if ! "$py" -m venv "$VENV" 2>/dev/null; then
      # Debian's system python3.11 ships venv/ensurepip separately.
      say "python3.11 has no working venv module: installing python3.11-venv with apt"
      rm -rf "$VENV"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11-venv </dev/null
      "$py" -m venv "$VENV"
    fi
  fi
  say "pip install apache-flink-libraries==$FLINK_VERSION (~330 MB) and apache-flink==$FLINK_VERSION"
  local started=$SECONDS
  "$VENV/bin/pip" install --no-input --disable-pip-version-check --no-deps --progress-bar off \
    "apache-flink-libraries==$FLINK_VERSION" "apache-flink==$FLINK_VERSION" </dev/null >&2
  [[ -f $FLINK_HOME_DIR/lib/flink-dist-$FLINK_VERSION.jar ]] ||
    die "install incomplete: $FLINK_HOME_DIR/lib/flink-dist-$FLINK_VERSION.jar missing"
  [[ -x $FLINK_HOME_DIR/bin/jobmanager.sh && -f $FLINK_HOME_DIR/conf/config.yaml ]] ||
    die "install incomplete: bin scripts or conf missing under $FLINK_HOME_DIR"
  touch "$(installed_marker)"
  say "installed in $((SECONDS - started)) s"
  record_cds_archive
  echo "FLINK_HOME=$FLINK_HOME_DIR"
}

# Class-data sharing (JDK 17 dynamic archive): a TaskManager's start-up is mostly loading and
# verifying Flink's classes. Measured here: registered 6.7-6.9 s -> 5.2-5.4 s after the start,
# CPU 6-7 s -> 4 s, which on a loaded machine (a restart beside running jobs, CI) is most of a
# TaskManager's start. The archive is only valid for this Flink and JVM; a JVM that cannot use
# it (or finds none) starts as it would without.
cds_archive() { echo "$LAB/cds/taskmanager-$FLINK_VERSION.jsa"; }
free_port() { local p=$1; while port_busy "$p"; do p=$((p + 1)); done; echo "$p"; }

record_cds_archive() { # a TaskManager of a scratch cluster, run to registration, dumps its classes
  local archive name=cds-recording dir rest rpc pid registered=0 started=$SECONDS
  archive=$(cds_archive)
  [[ -f $archive ]] && return
  say "recording a TaskManager's classes for class-data sharing (once)"
  mkdir -p "$(dirname "$archive")"
  rest=$(free_port 18060) rpc=$(free_port 16060)
  # 9>&-: the scratch JVMs must not inherit the install lock (one left running would hold it).
  cmd_start "$name" --rest-port "$rest" --rpc-port "$rpc" --taskmanagers 0 >/dev/null 9>&-
  dir=$(cluster_dir "$name")
  JVM_ARGS="-XX:ArchiveClassesAtExit=$archive.tmp" FLINK_CONF_DIR=$dir/conf FLINK_LOG_DIR=$dir/log \
    "$FLINK_HOME_DIR/bin/taskmanager.sh" start-foreground -Dtaskmanager.resource-id=cds-recording \
    >"$dir/log/cds-recording.out" 2>&1 9>&- &
  pid=$!
  while ((SECONDS - started < 120)) && kill -0 "$pid" 2>/dev/null; do
    registered=$(json_int "$(overview "$rest")" taskmanagers)
    [[ ${registered:-0} -ge 1 ]] && break
    sleep 0.5
  done
  # SIGTERM is a normal JVM exit: the archive is written then.
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  cmd_stop "$name" >/dev/null 2>&1 || true
  if [[ ${registered:-0} -ge 1 && -s $archive.tmp ]]; then
    mv "$archive.tmp" "$archive"
    rm -rf "$dir"
    say "class-data-sharing archive $archive ($(du -m "$archive" | cut -f1) MB) in $((SECONDS - started)) s"
  else
    rm -f "$archive.tmp"
    say "no class-data-sharing archive (TaskManagers start without it): see $dir/log"
  fi
}

require_installed() {
  [[ -f $(installed_marker) ]] || die "Flink is not installed in $LAB: run '$0 install' first"
}

cluster_dir() {
  [[ ${1:-} =~ ^[A-Za-z0-9_.-]+$ ]] || die "cluster NAME must match [A-Za-z0-9_.-]+ (got '${1:-}')"
  echo "$LAB/clusters/$1"
}

# The shipped JVM flags (--add-opens/--add-exports that Flink needs on Java 17), one line.
shipped_java_opts() {
  awk '
    /^env:/ {in_env=1; next}
    in_env && /^[^ #]/ {in_env=0}
    in_env && /opts:/ {in_opts=1; next}
    in_opts && /all:/ {grab=1; sub(/.*all:[ ]*/, ""); if ($0 != "") print; next}
    grab && /^[ ]+-/ {print; next}
    grab {grab=0; in_opts=0}
  ' "$FLINK_HOME_DIR/conf/config.yaml" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}

PEKKO_STARTUP_OPT=-Dpekko.remote.classic.startup-timeout=60s

write_config() { # dir rest rpc tms slots tm_mem jm_mem scheduler
  local dir=$1 rest=$2 rpc=$3 tms=$4 slots=$5 tm_mem=$6 jm_mem=$7 scheduler=$8
  local opts
  opts=$(shipped_java_opts)
  [[ -n $opts ]] || die "could not read env.java.opts.all from the shipped config.yaml"
  cat >"$dir/conf/config.yaml" <<EOF
# Written by scripts/flink-lab.sh for cluster $(basename "$dir"); rewritten on each start.
# Pekko's remoting start is bounded by its own pekko.remote.classic.startup-timeout (10 s), a key
# Flink's pekko.startup-timeout does not reach (Flink writes pekko.remote.startup-timeout); a
# TaskManager started on a loaded machine (CI, or beside production) timed out there and exited.
# A JVM system property overrides Pekko's settings.
env.java.opts.all: "$opts $PEKKO_STARTUP_OPT"
$([[ -f $(cds_archive) ]] && echo "env.java.opts.taskmanager: \"-XX:SharedArchiveFile=$(cds_archive)\"")
env.log.dir: $dir/log
env.pid.dir: $dir/pid
io.tmp.dirs: $dir/tmp
jobmanager.bind-host: 127.0.0.1
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc
jobmanager.memory.process.size: $jm_mem
jobmanager.execution.failover-strategy: region
jobmanager.scheduler: $scheduler
# Demeter decides when to rescale (with its own hysteresis); Flink's default 30-s cooldown after
# a start or a rescale only held back the in-place change it had ordered (the job runs on at the
# old parallelism meanwhile).
jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling: 5 s
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: $slots
taskmanager.load-balance.mode: slots
taskmanager.memory.process.size: $tm_mem
taskmanager.memory.managed.fraction: 0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest
blob.server.port: 0
state.backend.type: hashmap
execution.checkpointing.dir: file://$dir/checkpoints
execution.checkpointing.savepoint-dir: file://$dir/savepoints
execution.checkpointing.num-retained: 3
execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 1000
restart-strategy.fixed-delay.delay: 1 s
metrics.latency.interval: 0
metrics.fetcher.update-interval: 1000
# Bounds the REST metric fetcher: it starts no new fetch until the last one ends, and a fetch
# waits this long on a TaskManager that stopped answering (default 10 min of frozen metrics).
web.timeout: 30 s
web.submit.enable: true
web.upload.dir: $dir/upload
heartbeat.interval: 2 s
heartbeat.timeout: 10 s
EOF
  echo "127.0.0.1:$rest" >"$dir/conf/masters"
  : >"$dir/conf/workers"
  for ((i = 0; i < tms; i++)); do echo 127.0.0.1 >>"$dir/conf/workers"; done
  cat >"$dir/env" <<EOF
export FLINK_HOME=$FLINK_HOME_DIR
export FLINK_CONF_DIR=$dir/conf
export FLINK_LOG_DIR=$dir/log
export FLINK_PID_DIR=$dir/pid
export FLINK_REST_URL=http://127.0.0.1:$rest
EOF
}

# PIDs of the cluster's live JVMs: those with its conf dir as an argument (Flink's scripts pass
# --configDir "$FLINK_CONF_DIR"). This finds what its pid files list, TaskManagers an agent started
# (foreground ones have no pid file), and never a reused PID from a stale pid file.
cluster_pids() {
  local f pid
  grep -lxzF -- "$1/conf" /proc/[0-9]*/cmdline 2>/dev/null | while read -r f; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == java ]] && echo "$pid"
  done
  return 0
}

pids_of_role() { # dir role(standalonesession|taskexecutor)
  local pid
  for pid in $(cluster_pids "$1"); do
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qiE "$2" && echo "$pid"
  done
  return 0
}

rest_port_of() { sed -n 's/^rest.port: //p' "$1/conf/config.yaml"; }

overview() { curl -sf --max-time 3 "http://127.0.0.1:$1/overview" 2>/dev/null || true; }

json_int() { # json key -> integer value or empty
  sed -n "s/.*\"$2\":\([0-9][0-9]*\).*/\1/p" <<<"$1"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

cmd_start() {
  local name=${1:-}; [[ -n $name ]] || die "start needs a NAME"; shift
  local rest=8081 rpc=6123 tms=1 slots=2 tm_mem=1g jm_mem=1g scheduler=adaptive
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rest-port) rest=$2; shift 2 ;;
      --rpc-port) rpc=$2; shift 2 ;;
      --taskmanagers) tms=$2; shift 2 ;;
      --slots) slots=$2; shift 2 ;;
      --tm-memory) tm_mem=$2; shift 2 ;;
      --jm-memory) jm_mem=$2; shift 2 ;;
      --scheduler) scheduler=$2; shift 2 ;;
      *) die "unknown start option '$1' (see --help)" ;;
    esac
  done
  [[ $scheduler == adaptive || $scheduler == default ]] || die "--scheduler must be adaptive or default"
  [[ $tms =~ ^[0-9]+$ && $slots =~ ^[1-9][0-9]*$ ]] || die "--taskmanagers/--slots must be numbers"
  require_installed
  local dir; dir=$(cluster_dir "$name")
  export FLINK_HOME=$FLINK_HOME_DIR FLINK_CONF_DIR=$dir/conf FLINK_LOG_DIR=$dir/log FLINK_PID_DIR=$dir/pid

  if [[ -n $(pids_of_role "$dir" standalonesession) ]]; then
    local running_port; running_port=$(rest_port_of "$dir")
    [[ $running_port == "$rest" ]] ||
      die "cluster $name already runs with REST port $running_port; stop it first to change its settings"
    say "cluster $name is already running"
    local have i
    have=$(pids_of_role "$dir" taskexecutor | wc -l)
    for ((i = have; i < tms; i++)); do
      say "starting missing TaskManager $((i + 1))/$tms"
      "$FLINK_HOME/bin/taskmanager.sh" start >"$dir/log/start-tm$i.out" 2>&1 ||
        { cat "$dir/log/start-tm$i.out" >&2; die "taskmanager.sh start failed"; }
    done
  else
    port_busy "$rest" && die "REST port $rest is in use (another cluster? pick --rest-port)"
    port_busy "$rpc" && die "RPC port $rpc is in use (another cluster? pick --rpc-port)"
    mkdir -p "$dir"/{conf,log,pid,checkpoints,savepoints,tmp,upload}
    STOP_ON_FAILURE=$name
    # log4j/logback files come from the shipped conf; config.yaml, masters and workers are ours.
    cp "$FLINK_HOME_DIR"/conf/log4j*.properties "$FLINK_HOME_DIR"/conf/logback*.xml "$dir/conf/"
    write_config "$dir" "$rest" "$rpc" "$tms" "$slots" "$tm_mem" "$jm_mem" "$scheduler"
    # The start scripts each spend seconds in helper JVMs: run them in parallel (flink-daemon.sh
    # locks the pid file; TaskManagers retry until the JobManager is up).
    say "starting JobManager (REST $rest, RPC $rpc) and $tms TaskManager(s) of $name"
    local i failed=0 jobs=()
    "$FLINK_HOME/bin/jobmanager.sh" start >"$dir/log/start-jm.out" 2>&1 &
    jobs+=($!)
    for ((i = 0; i < tms; i++)); do
      "$FLINK_HOME/bin/taskmanager.sh" start >"$dir/log/start-tm$i.out" 2>&1 &
      jobs+=($!)
    done
    for i in "${jobs[@]}"; do wait "$i" || failed=1; done
    ((failed == 0)) || { cat "$dir"/log/start-*.out >&2; die "a Flink start script failed (output above)"; }
  fi
  wait_ready "$name" "$dir" "$(rest_port_of "$dir")" "$tms"
  STOP_ON_FAILURE=
  echo "http://127.0.0.1:$(rest_port_of "$dir")"
}

wait_ready() { # name dir rest_port taskmanagers
  local name=$1 dir=$2 rest=$3 want=$4 started=$SECONDS ov registered=0 last_note=-1 rest_state
  while :; do
    ov=$(overview "$rest")
    registered=$(json_int "$ov" taskmanagers)
    rest_state=down; [[ -n $ov ]] && rest_state=up
    if [[ -n $ov && ${registered:-0} -ge $want ]]; then
      say "cluster $name ready after $((SECONDS - started)) s: $registered TaskManager(s), $(json_int "$ov" slots-total) slots"
      return
    fi
    if ((SECONDS - started >= WAIT_TIMEOUT)); then
      tail -n 20 "$dir"/log/*.log "$dir"/log/start-*.out >&2 2>/dev/null || true
      die "cluster $name not ready after ${WAIT_TIMEOUT} s (REST $rest_state, ${registered:-0}/$want TaskManagers)"
    fi
    [[ -n $(pids_of_role "$dir" standalonesession) ]] || {
      tail -n 30 "$dir"/log/*standalonesession*.log "$dir"/log/start-*.out >&2 2>/dev/null || true
      die "JobManager of $name is not running (log above)"
    }
    # A TaskManager with an impossible memory setup exits at once; its reason is in its .out file.
    (($(pids_of_role "$dir" taskexecutor | wc -l) >= want)) || {
      tail -n 30 "$dir"/log/*taskexecutor*.out "$dir"/log/start-*.out >&2 2>/dev/null || true
      die "a TaskManager of $name exited (output above)"
    }
    if (((SECONDS - started) / 5 != last_note)); then
      last_note=$(((SECONDS - started) / 5))
      say "waiting for $name: REST $rest_state, ${registered:-0}/$want TaskManagers ($((SECONDS - started)) s)"
    fi
    sleep 1
  done
}

cmd_stop() {
  local name=${1:-}; [[ -n $name ]] || die "stop needs a NAME"
  local dir; dir=$(cluster_dir "$name")
  [[ -d $dir ]] || { say "no cluster $name"; return; }
  local pids pid started=$SECONDS signalled=" "
  pids=$(cluster_pids "$dir")
  [[ -n $pids ]] || { say "cluster $name is not running"; rm -f "$dir"/pid/*.pid; return; }
  say "stopping cluster $name (PIDs $(tr '\n' ' ' <<<"$pids"))"
  # Re-list each round: a TaskManager still starting (its script execs java late) joins late.
  while [[ -n $pids ]]; do
    if ((SECONDS - started >= 30)); then
      say "still alive after 30 s: kill -9 $(tr '\n' ' ' <<<"$pids")"
      for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
      sleep 1
      break
    fi
    for pid in $pids; do
      [[ $signalled == *" $pid "* ]] && continue
      kill "$pid" 2>/dev/null || true
      signalled+="$pid "
    done
    sleep 0.5
    pids=$(cluster_pids "$dir")
  done
  rm -f "$dir"/pid/*.pid
  say "cluster $name stopped in $((SECONDS - started)) s"
}

cmd_status() {
  local names=("$@") dir name rest ov
  if [[ ${#names[@]} -eq 0 ]]; then
    for dir in "$LAB"/clusters/*/; do [[ -d $dir ]] && names+=("$(basename "$dir")"); done
  fi
  [[ ${#names[@]} -gt 0 ]] || { echo "no clusters in $LAB/clusters"; return; }
  for name in "${names[@]}"; do
    dir=$(cluster_dir "$name")
    [[ -f $dir/conf/config.yaml ]] || { echo "$name: unknown"; continue; }
    rest=$(rest_port_of "$dir")
    ov=$(overview "$rest")
    printf '%s: REST http://127.0.0.1:%s  JobManager PIDs [%s]  TaskManager PIDs [%s]\n' "$name" "$rest" \
      "$(pids_of_role "$dir" standalonesession | tr '\n' ' ' | sed 's/ $//')" \
      "$(pids_of_role "$dir" taskexecutor | tr '\n' ' ' | sed 's/ $//')"
    printf '  overview: %s\n' "${ov:-REST not answering}"
  done
}

cmd_env() {
  local name=${1:-}; [[ -n $name ]] || die "env needs a NAME"
  local dir; dir=$(cluster_dir "$name")
  [[ -f $dir/env ]] || die "cluster $name was never started (no $dir/env)"
  cat "$dir/env"
}

cmd_logs() {
  local name=${1:-}; [[ -n $name ]] || die "logs needs a NAME"
  local lines=${2:-40} dir f
  dir=$(cluster_dir "$name")
  for f in "$dir"/log/*; do
    [[ -f $f ]] || continue
    printf '==> %s <==\n' "$f"
    tail -n "$lines" "$f"
  done
}

case ${1:-} in
  install) shift; cmd_install "$@" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  logs) shift; cmd_logs "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
