#!/usr/bin/env bash
# The product on one machine: a real local Flink 2.3 cluster (installed into .lab/ from PyPI on
# first use), the Demeter coordinator and a local agent, with a live view of what the
# coordinator receives. Ctrl-C (or DURATION seconds) stops everything it started.
#
#   scripts/run-local.sh                 run until Ctrl-C
#   DURATION=60 scripts/run-local.sh     run for a minute
#   NO_FLINK=1 scripts/run-local.sh      Demeter only (no TaskManagers to watch)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
lab=${DEMETER_LAB:-$root/.lab}
run=$lab/demeter-local
mkdir -p "$run"
bin=$root/target/release

echo "==> building Demeter (release)"
cargo build --release --workspace --bins --quiet

if [ ! -f "$run/pki/ca.pem" ]; then
  echo "==> creating the cluster CA and certificates in $run/pki"
  "$bin/demeter-coordinator" certs init --dir "$run/pki" --cluster local
  "$bin/demeter-coordinator" certs issue --dir "$run/pki" --name coordinator --role coordinator
  "$bin/demeter-coordinator" certs issue --dir "$run/pki" --name "$(hostname)" --role agent
  "$bin/demeter-coordinator" certs issue --dir "$run/pki" --name operator --role cli
fi

cat > "$run/coordinator.toml" <<TOML
listen = "127.0.0.1:7443"
store = "$run/coordinator.redb"
log = "info,quinn=warn"
[tls]
ca = "$run/pki/ca.pem"
cert = "$run/pki/coordinator.pem"
key = "$run/pki/coordinator.key"
TOML
cat > "$run/agent.toml" <<TOML
coordinator = "127.0.0.1:7443"
log = "info,quinn=warn"
[tls]
ca = "$run/pki/ca.pem"
cert = "$run/pki/$(hostname).pem"
key = "$run/pki/$(hostname).key"
[sampling]
interval_ms = 1000
TOML

pids=()
stop_all() {
  echo
  echo "==> stopping"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${NO_FLINK:-0}" != 1 ]; then scripts/flink-lab.sh stop demo || true; fi
  echo "logs: $run/*.log"
}
trap stop_all EXIT
trap 'exit 0' INT TERM

if [ "${NO_FLINK:-0}" != 1 ]; then
  echo "==> real Flink 2.3 (first run downloads ~330 MB from PyPI)"
  scripts/flink-lab.sh install
  scripts/flink-lab.sh start demo --rest-port 8081 --rpc-port 6123 --taskmanagers 2 --slots 2
fi

echo "==> starting the coordinator and the agent"
"$bin/demeter-coordinator" run --config "$run/coordinator.toml" >>"$run/coordinator.log" 2>&1 &
pids+=($!)
sleep 1
"$bin/demeter-agent" --config "$run/agent.toml" >>"$run/agent.log" 2>&1 &
pids+=($!)

deadline=$(( $(date +%s) + ${DURATION:-999999999} ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 3
  clear 2>/dev/null || true
  echo "Demeter — what the coordinator receives ($(date +%T)); Ctrl-C stops"
  echo
  "$bin/demeter-coordinator" agents --addr 127.0.0.1:7443 \
    --ca "$run/pki/ca.pem" --cert "$run/pki/operator.pem" --key "$run/pki/operator.key" || true
  echo
  tail -n 3 "$run/coordinator.log" | cut -c1-160
done
