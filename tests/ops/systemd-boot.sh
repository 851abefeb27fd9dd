#!/usr/bin/env bash
# Boots real systemd 252 (systemd-nspawn) in a scratch Debian 12 root holding both .debs,
# the Flink units and the TaskManager launcher, and checks at run time what the static
# checks cannot:
#  - a copy of demeter-agent.service with its ExecStart replaced by tests/ops/boot/agent-probe.sh
#    (same user, capability and sandbox) can do what the agent contract needs — write the
#    instance file, set-property/start/kill/reset-failed/stop flink-taskmanager@ through
#    polkit, read the TaskManager's 0600 hsperfdata file — and cannot read /etc/shadow, write
#    /etc or /proc/<pid>/mem, start other units or daemon-reload;
#  - the same for demeter-coordinator.service (tests/ops/boot/coordinator-probe.sh): config,
#    key, state dir, UDP 7443 and TCP 127.0.0.1:7480 yes; other processes, /etc, /root no;
#  - flink-taskmanager@ and flink-jobmanager run in their sandboxes (a stand-in script plays
#    Flink's bin/*.sh: no JVM here), with the limits the probe set;
#  - demeter-agent and demeter-coordinator start in their sandboxes. While the binaries are
#    the placeholders (no sd_notify) that can only show that the binary ran (exit 0, result
#    "protocol"); with the real ones the units must become active.
source "$(dirname "$0")/lib.sh"
ops_build_debs

host=boot
dir="$OPS_HOSTS_DIR/$host"
root="$dir/root"
trap 'ops_host_down "$host"' EXIT

say "preparing the root"
ops_host_up "$host"
cp "$OPS_AGENT_DEB" "$OPS_COORDINATOR_DEB" "$root/tmp/"
chroot "$root" dpkg -i /tmp/demeter-agent.deb /tmp/demeter-coordinator.deb >"$dir/dpkg.log" 2>&1
chroot "$root" useradd --system --no-create-home --home-dir /var/lib/flink --shell /usr/sbin/nologin flink
install -m 0644 "$OPS_REPO/systemd/flink-jobmanager.service" "$OPS_REPO/systemd/flink-taskmanager@.service" \
    "$root/etc/systemd/system/"
install -D -m 0755 "$OPS_REPO/systemd/flink-taskmanager-start" "$root/usr/local/libexec/flink-taskmanager-start"
install -D -m 0755 "$OPS_REPO/tests/ops/boot/fake-flink.sh" "$root/opt/flink/bin/taskmanager.sh"
install -D -m 0755 "$OPS_REPO/tests/ops/boot/fake-flink.sh" "$root/opt/flink/bin/jobmanager.sh"
install -d -m 0775 -g "$(chroot "$root" id -g demeter)" "$root/etc/flink/taskmanagers"
# Certificates as demeter_pki installs them on a host that is coordinator and agent.
pki="$dir/pki"
mkdir -m 0700 "$pki"
pki_command=$(ops_pki_command)
"$pki_command" certs init --dir "$pki"
"$pki_command" certs issue --dir "$pki" --name "$host" --role coordinator
"$pki_command" certs issue --dir "$pki" --name "$host-agent" --role agent
tls="$root/etc/demeter/tls"
install -d -m 0750 "$tls"
install -m 0644 "$pki/ca.pem" "$tls/ca.pem"
install -m 0644 "$pki/$host.pem" "$tls/node.pem"
install -m 0640 "$pki/$host.key" "$tls/node.key"
install -m 0644 "$pki/$host-agent.pem" "$tls/agent.pem"
install -m 0640 "$pki/$host-agent.key" "$tls/agent.key"
chroot "$root" chgrp demeter /etc/demeter/tls /etc/demeter/tls/node.key /etc/demeter/tls/agent.key
sed -i -e 's|^coordinator = .*|coordinator = "127.0.0.1:7443"|' \
    -e "s|^server_name = .*|server_name = \"$host\"|" -e 's|/node\.pem"|/agent.pem"|' -e 's|/node\.key"|/agent.key"|' \
    "$root/etc/demeter/agent.toml"
for svc in agent coordinator; do # demeter-<svc>-probe.service: the real unit, probe as ExecStart
    install -D -m 0755 "$OPS_REPO/tests/ops/boot/$svc-probe.sh" "$root/usr/local/bin/$svc-probe"
    sed -e "s|^ExecStart=.*|ExecStart=/usr/local/bin/$svc-probe|" -e 's|^Type=notify|Type=oneshot|' \
        -e '/^WatchdogSec=/d' -e '/^NotifyAccess=/d' -e '/^Restart=/d' \
        "$OPS_REPO/systemd/demeter-$svc.service" >"$root/etc/systemd/system/demeter-$svc-probe.service"
done
say "booting systemd in the root (systemd-nspawn)"
ops_host_boot "$host" || { say "  FAIL  the container did not reach multi-user"; exit 1; }
in_ct() { ops_in_host "$host" "$@"; }

say "agent sandbox probe (demeter-agent.service with the probe as ExecStart)"
in_ct systemctl start demeter-agent-probe.service || true
probe="$root/var/lib/demeter-agent/probe.out"
in_ct systemctl show -p Result,ExecMainStatus demeter-agent-probe.service | sed 's/^/  /'
expect() { grep -qx "$1=$2" "$probe"; }
check "probe ran to the end" expect "done" yes
check "writes /etc/flink/taskmanagers/<instance>.env" expect write_instance_file yes
check "set-property --runtime CPUQuota/MemoryMax via polkit" expect set_property yes
check "starts flink-taskmanager@probe via polkit" expect start_taskmanager yes
check "limits applied: MemoryMax=576M, CPUQuota=50%" expect limits "603979776 500ms"
check "TaskManager got -D memory/slots from the instance file" grep -q \
    '^taskmanager_args=start-foreground -D taskmanager.memory.process.size=512m -D taskmanager.numberOfTaskSlots=1 -D taskmanager.resource-id=' "$probe"
check "reads the 0600 hsperfdata file in /tmp (CAP_DAC_READ_SEARCH)" expect read_hsperfdata yes
check "reads /proc/<pid>/stat of the TaskManager" expect read_proc_stat yes
check "cannot go through /proc/<pid>/root (no CAP_SYS_PTRACE)" expect read_hsperfdata_via_proc_root no
check "cannot read /etc/shadow's content" expect read_shadow no
check "cannot write /etc" expect write_etc no
check "cannot write /proc/<pid>/mem" expect write_proc_mem no
check "cannot start flink-jobmanager (polkit)" expect start_jobmanager no
check "cannot daemon-reload (polkit)" expect daemon_reload no
check "cannot restart dbus (polkit)" expect restart_dbus no
check "kills flink-taskmanager@probe via polkit" expect kill_taskmanager yes
check "reset-failed via polkit" expect reset_failed yes
check "stops flink-taskmanager@probe via polkit" expect stop_taskmanager yes
[ "$ops_failures" -eq 0 ] || cat "$probe"

say "coordinator sandbox probe (demeter-coordinator.service with the probe as ExecStart)"
in_ct systemctl start demeter-coordinator-probe.service || true
probe="$root/var/lib/demeter/probe.out"
check "probe ran to the end" expect "done" yes
check "reads its config" expect read_config yes
check "reads its key (0640 root:demeter, with PrivateUsers=yes)" expect read_key yes
check "writes /var/lib/demeter" expect write_state yes
check "writes its private /tmp" expect write_tmp yes
check "binds UDP 0.0.0.0:7443 (QUIC)" expect bind_quic_udp_7443 yes
check "binds TCP 127.0.0.1:7480 (HTTP)" expect bind_http_tcp_7480 yes
check "cannot see other processes (ProtectProc=invisible)" expect see_pid_1 no
check "cannot read /etc/shadow" expect read_shadow no
check "cannot write /etc" expect write_etc no
check "cannot write /root" expect write_home no
[ "$ops_failures" -eq 0 ] || cat "$probe"

say "Flink units in their sandboxes (stand-in scripts)"
in_ct systemctl start flink-jobmanager.service || true
sleep 1
check "flink-jobmanager.service active" in_ct systemctl is-active flink-jobmanager.service
jm_pid=$(in_ct systemctl show -p MainPID --value flink-jobmanager.service)
check "JobManager has a private /tmp" in_ct test ! -e "/tmp/hsperfdata_flink/$jm_pid"
in_ct systemctl stop flink-jobmanager.service || true

say "Demeter services in their sandboxes"
for svc in demeter-coordinator demeter-agent; do # the agent dials the coordinator
    in_ct systemctl start "$svc.service" >/dev/null 2>&1 || true
    show=$(in_ct systemctl show -p ActiveState,Result,ExecMainCode,ExecMainStatus "$svc.service" | tr '\n' ' ')
    say "  $svc: $show"
    check "$svc active (READY=1 received)" grep -q 'ActiveState=active' <<<"$show"
done

ops_finish systemd-boot
