#!/usr/bin/env bash
# Boots real systemd (systemd-nspawn) in a scratch Debian 12 root holding the Flink units and
# the TaskManager launcher, with a real JVM (the host's JDK 17, bound read-only) and the lab's
# Flink 2.3 (scripts/flink-lab.sh install, bound read-only at /opt/flink), and checks what the
# stand-in scripts of tests/ops/systemd-boot.sh cannot:
#  - flink-jobmanager.service and flink-taskmanager@.service run Flink inside their sandboxes
#    (ProtectSystem=strict, the system-call filter, no capabilities) and the TaskManager
#    registers with the JobManager;
#  - the TaskManager's first stop records a class-data-sharing archive in /var/lib/flink/cds,
#    its next start publishes and maps it (named by -XX:SharedArchiveFile and present in the
#    JVM's memory map), and it registers again; a second instance maps the same archive;
#  - a job (the benchmark job, exactly-once FileSink, the adaptive scheduler as the flink role
#    configures it) runs on the two TaskManagers; one is SIGKILLed, systemd restarts it
#    (Restart=on-failure), it registers again, the job runs at its parallelism and checkpoints
#    again, and its committed output, after a stop with a savepoint, holds every record once.
source "$(dirname "$0")/lib.sh"

host=flink-units
dir="$OPS_HOSTS_DIR/$host"
root="$dir/root"
rest=18781
rpc=16781
trap 'ops_host_down "$host"' EXIT

say "Flink 2.3 (the lab's) and the host's JDK"
flink_home=$("$OPS_REPO/scripts/flink-lab.sh" install 2>"$OPS_LAB/flink-units-install.log" | sed -n 's/^FLINK_HOME=//p')
[ -x "$flink_home/bin/taskmanager.sh" ] || { tail -20 "$OPS_LAB/flink-units-install.log"; exit 1; }
command -v java >/dev/null || { say "  FAIL  no java (17) on PATH: the lab's Flink needs it too"; exit 1; }
java=$(readlink -f "$(command -v java)")
jdk=${java%/bin/java}
# Debian's JDK keeps its configuration in /etc/java-<n>-openjdk, linked from $jdk/conf.
jdk_etc=$(readlink -f "$jdk/conf/security/java.security")
jdk_etc=${jdk_etc%/security/java.security}
say "  $flink_home, $jdk, $jdk_etc"

say "preparing the root"
ops_host_up "$host"
chroot "$root" useradd --system --no-create-home --home-dir /var/lib/flink --shell /usr/sbin/nologin flink
install -m 0644 "$OPS_REPO/systemd/flink-jobmanager.service" "$OPS_REPO/systemd/flink-taskmanager@.service" \
    "$root/etc/systemd/system/"
install -D -m 0755 "$OPS_REPO/systemd/flink-taskmanager-start" "$root/usr/local/libexec/flink-taskmanager-start"
ln -s "$jdk/bin/java" "$root/usr/bin/java" # the bind mount below makes it resolve inside
install -d -m 0750 -o root -g "$(chroot "$root" id -g flink)" "$root/etc/flink"
install -d -m 0755 "$root/etc/flink/taskmanagers"
cp "$flink_home"/conf/log4j-console.properties "$root/etc/flink/"
# The distribution's JVM module flags (Java 17), as the flink role merges them in.
opts=$(sed -n 's/^ *all: *\(--add-.*\)$/\1/p' "$flink_home/conf/config.yaml" | head -1)
[ -n "$opts" ] || { say "  no env.java.opts.all in the distribution's config.yaml"; exit 1; }
cat >"$root/etc/flink/config.yaml" <<EOF
env.java.opts.all: "$opts -Dpekko.remote.classic.startup-timeout=60s"
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc
jobmanager.bind-host: 127.0.0.1
jobmanager.memory.process.size: 768m
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest
io.tmp.dirs: /var/lib/flink/tmp
web.upload.dir: /var/lib/flink/upload
jobmanager.scheduler: adaptive
execution.checkpointing.dir: file:///var/lib/flink/checkpoints
execution.checkpointing.savepoint-dir: file:///var/lib/flink/savepoints
EOF
chmod 0640 "$root/etc/flink/config.yaml"
chroot "$root" chgrp flink /etc/flink/config.yaml /etc/flink/log4j-console.properties
for tm in tm-1 tm-2; do
    printf 'TM_PROCESS_MEMORY=1g\nTM_SLOTS=1\n' >"$root/etc/flink/taskmanagers/$tm.env"
done

say "booting systemd in the root (systemd-nspawn)"
OPS_NSPAWN_ARGS="--bind-ro=$jdk --bind-ro=$jdk_etc --bind-ro=$flink_home:/opt/flink" ops_host_boot "$host" ||
    { say "  FAIL  the container did not reach multi-user"; exit 1; }
in_ct() { ops_in_host "$host" "$@"; }

registered() { # registered N: the JobManager lists N TaskManagers within 120 s
    local n=''
    for _ in $(seq 240); do
        n=$(curl -fsS --max-time 2 "http://127.0.0.1:$rest/overview" 2>/dev/null |
            sed -n 's/.*"taskmanagers":\([0-9]*\).*/\1/p')
        [ "${n:-}" = "$1" ] && return 0
        sleep 0.5
    done
    say "  the JobManager lists ${n:-no} TaskManagers, not $1"
    return 1
}
jvm_flags() { # jvm_flags UNIT: the main process's (the JVM's) command line, one argument per line
    local pid
    pid=$(in_ct systemctl show -p MainPID --value "$1")
    [ "${pid:-0}" -gt 0 ] && in_ct sh -c "tr '\\000' '\\n' </proc/$pid/cmdline"
}
journal() { in_ct journalctl -u "$1" --no-pager | grep -m 8 -B2 -A6 "Exception\|Error\|error" | sed "s/^/    /"; }

say "JobManager and TaskManager in their sandboxes, real JVMs"
in_ct systemctl start flink-jobmanager.service
check "flink-jobmanager.service active" in_ct systemctl is-active flink-jobmanager.service
in_ct systemctl start flink-taskmanager@tm-1.service || true
check "flink-taskmanager@tm-1 registers" registered 1
if [ "$ops_failures" -gt 0 ]; then # nothing below can pass
    journal flink-jobmanager.service
    journal flink-taskmanager@tm-1.service
    ops_finish flink-units
fi
records() { jvm_flags flink-taskmanager@tm-1.service | grep -q '^-XX:ArchiveClassesAtExit=/var/lib/flink/cds/'; }
check "its first start records a class-data-sharing archive" records
in_ct systemctl stop flink-taskmanager@tm-1.service
recorded() { compgen -G "$root/var/lib/flink/cds/taskmanager-*.jsa.tm-1.tmp" >/dev/null; }
check "its stop (SIGTERM, a normal JVM exit) wrote the recording" recorded
check "the JobManager lists no TaskManager" registered 0

say "the next starts map the archive"
maps() { # maps INSTANCE: the JVM was told to map the published archive, and has it mapped
    local unit="flink-taskmanager@$1.service" archive pid
    archive=$(jvm_flags "$unit" | sed -n 's|^-XX:SharedArchiveFile=\(/var/lib/flink/cds/taskmanager-[0-9]*\.jsa\)$|\1|p')
    pid=$(in_ct systemctl show -p MainPID --value "$unit")
    # A JVM that cannot use an archive falls back without a word (-Xshare:auto, JDK 17): only
    # its memory map tells.
    [ -n "$archive" ] && in_ct grep -qF "$archive" "/proc/$pid/maps"
}
in_ct systemctl start flink-taskmanager@tm-1.service || true
check "flink-taskmanager@tm-1 registers again" registered 1
check "tm-1 maps the archive it recorded" maps tm-1
in_ct systemctl start flink-taskmanager@tm-2.service
check "flink-taskmanager@tm-2 registers" registered 2
check "tm-2 maps the same archive" maps tm-2
published() {
    local archives=("$root"/var/lib/flink/cds/taskmanager-*.jsa)
    [ "${#archives[@]}" -eq 1 ] && [ -s "${archives[0]}" ] &&
        [ "$(stat -c %u "${archives[0]}")" = "$(chroot "$root" id -u flink)" ]
}
check "one archive, owned by flink" published
[ "$ops_failures" -eq 0 ] || { journal flink-taskmanager@tm-1.service; journal flink-taskmanager@tm-2.service; }

say "a job on the units survives a TaskManager's crash"
source "$(dirname "$0")/flink-units-job.sh"
in_ct systemctl stop flink-taskmanager@tm-1.service flink-taskmanager@tm-2.service flink-jobmanager.service || true

ops_finish flink-units
