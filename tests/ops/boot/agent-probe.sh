#!/bin/sh
# Runs as ExecStart of demeter-agent-probe.service, a copy of demeter-agent.service (same
# user and sandbox) made by tests/ops/systemd-boot.sh. Tries what the agent must be able to
# do (systemd/README.md) and what it must not, and writes NAME=yes|no lines to its state dir.
out=/var/lib/demeter-agent/probe.out
: >"$out"
try() {
    name=$1
    shift
    if "$@" >/dev/null 2>&1; then echo "$name=yes" >>"$out"; else echo "$name=no" >>"$out"; fi
}
ctl() { systemctl --no-ask-password "$@"; }
unit=flink-taskmanager@probe.service
dir=/etc/flink/taskmanagers

try write_instance_file sh -c "printf 'TM_PROCESS_MEMORY=512m\nTM_SLOTS=1\n' >$dir/probe.env.tmp &&
    chmod 0644 $dir/probe.env.tmp && mv $dir/probe.env.tmp $dir/probe.env"
try set_property ctl set-property --runtime "$unit" CPUQuota=50% MemoryMax=576M
try start_taskmanager ctl start "$unit"
pid=0
for _ in $(seq 50); do
    pid=$(systemctl show -p MainPID --value "$unit")
    [ "$pid" -gt 0 ] && [ -e "/tmp/hsperfdata_flink/$pid" ] && break
    sleep 0.2
done
echo "limits=$(systemctl show -p MemoryMax --value "$unit") $(systemctl show -p CPUQuotaPerSecUSec --value "$unit")" >>"$out"
echo "taskmanager_args=$(cat "/tmp/hsperfdata_flink/$pid" 2>/dev/null)" >>"$out"
try read_hsperfdata cat "/tmp/hsperfdata_flink/$pid"
try read_hsperfdata_via_proc_root cat "/proc/$pid/root/tmp/hsperfdata_flink/$pid"
try read_proc_stat cat "/proc/$pid/stat"
# InaccessiblePaths= puts an empty 0000 node there; CAP_DAC_READ_SEARCH opens it, finds nothing.
try read_shadow grep -q "^root:" /etc/shadow
try write_etc sh -c 'echo x >/etc/demeter/probe'
try write_proc_mem sh -c "printf x >/proc/$pid/mem"
try start_jobmanager ctl start flink-jobmanager.service
try daemon_reload ctl daemon-reload
try restart_dbus ctl restart dbus.service
try kill_taskmanager ctl kill --signal=SIGKILL "$unit"
try reset_failed ctl reset-failed "$unit"
try stop_taskmanager ctl stop "$unit"
echo done=yes >>"$out"
