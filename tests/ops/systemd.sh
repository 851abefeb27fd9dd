#!/usr/bin/env bash
# Checks the units in systemd/:
#  1. `systemd-analyze verify` of each unit reports nothing (any output fails: verify
#     exits 0 on unknown keys and bad values, it only prints them);
#  2. `systemd-analyze security --offline=yes` exposure of each unit is printed, and the two
#     Demeter services must be at or below 2.0 (`--threshold=20`, systemd's own comparison);
#  3. the TaskManager launcher accepts a good instance file and rejects bad ones, and records,
#     publishes and maps a class-data-sharing archive keyed to the JVM and Flink's jars;
#  4. the polkit rule allows user demeter exactly the flink-taskmanager@ verbs (node runs it
#     with polkit's calling convention; tests/ops/systemd-boot.sh runs it in real polkitd);
#  5. shellcheck is clean on the launcher, the maintainer scripts and these tests.
# verify needs every ExecStart= binary to exist and the whole unit tree (targets): it runs
# with --root= on a scratch tree holding the host's /usr/lib/systemd/system, our units in
# /etc/systemd/system, the real launcher script, and empty executables at the Demeter and
# Flink binary paths (the unit file is under test here, not the binaries; tests/ops/deb.sh
# and tests/ops/ansible-run.sh install the real ones).
source "$(dirname "$0")/lib.sh"
command -v systemd-analyze >/dev/null || ops_apt_install systemd-analyze systemd

units=(demeter-agent.service demeter-coordinator.service flink-jobmanager.service "flink-taskmanager@.service")
demeter_units=(demeter-agent.service demeter-coordinator.service)
root=$(mktemp -d "$OPS_LAB/systemd-root.XXXXXX")
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/usr/bin" \
    "$root/usr/local/libexec" "$root/opt/flink/bin"
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
for unit in "${units[@]}"; do cp "$OPS_REPO/systemd/$unit" "$root/etc/systemd/system/"; done
install -m 0755 "$OPS_REPO/systemd/flink-taskmanager-start" "$root/usr/local/libexec/"
for stub in usr/bin/demeter-agent usr/bin/demeter-coordinator opt/flink/bin/jobmanager.sh; do
    printf '#!/bin/sh\nexit 0\n' >"$root/$stub"
    chmod 0755 "$root/$stub"
done

instance_of() { [ "$1" = "flink-taskmanager@.service" ] && echo "flink-taskmanager@tm-1.service" || echo "$1"; }

verify_quiet() { # verify_quiet ROOT UNIT: exit 0 and print nothing
    local out
    if out=$(systemd-analyze verify --root="$1" "$2" 2>&1) && [ -z "$out" ]; then return 0; fi
    printf '%s\n' "$out" >&2
    return 1
}

say "systemd-analyze verify ($(systemd-analyze --version | head -1))"
for unit in "${units[@]}"; do
    check "verify $unit" verify_quiet "$root" "$(instance_of "$unit")"
done
# The check above must be able to fail: a unit with a bad value must be caught.
broken=$(mktemp -d "$OPS_LAB/systemd-broken.XXXXXX")
cp -a "$root/." "$broken/"
sed -i 's/^ProtectSystem=strict/ProtectSystem=banana/' "$broken/etc/systemd/system/demeter-agent.service"
check "verify reports ProtectSystem=banana in a broken copy" \
    bash -c "systemd-analyze verify --root='$broken' demeter-agent.service 2>&1 | grep -q 'protect system value'"
rm -rf "$broken"

say "systemd-analyze security --offline=yes (exposure: 0 = locked down, 10 = unprotected)"
for unit in "${units[@]}"; do
    name=$(instance_of "$unit")
    score=$(systemd-analyze security --offline=yes --root="$root" "$name" 2>/dev/null |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    say "  exposure $name: ${score:-?}"
done
for unit in "${demeter_units[@]}"; do
    check "$unit exposure <= 2.0" systemd-analyze security --offline=yes --root="$root" --threshold=20 "$unit"
done

say "flink-taskmanager-start (the TaskManager launcher)"
fake=$(mktemp -d "$OPS_LAB/launcher.XXXXXX")
trap 'rm -rf "$root" "$fake"' EXIT
mkdir -p "$fake/flink/bin" "$fake/flink/lib" "$fake/tms" "$fake/jdk/bin"
# The stand-in prints its arguments and leaves the JVM flags the launcher chose in jvm_args.
cat >"$fake/flink/bin/taskmanager.sh" <<STANDIN
#!/bin/sh
printf '%s\n' "\$@"
printf '%s' "\${JVM_ARGS:-}" >"$fake/jvm_args"
STANDIN
printf '#!/bin/sh\nexit 0\n' >"$fake/jdk/bin/java"
chmod 0755 "$fake/flink/bin/taskmanager.sh" "$fake/jdk/bin/java"
: >"$fake/flink/lib/flink-dist.jar"
launch() {
    JAVA_HOME=${java_home-$fake/jdk} FLINK_CDS_DIR=${cds_dir-$fake/cds} FLINK_HOME="$fake/flink" \
        FLINK_TASKMANAGERS_DIR="$fake/tms" "$OPS_REPO/systemd/flink-taskmanager-start" "$@"
}
printf '# written by the agent\nTM_PROCESS_MEMORY=1536m\nTM_SLOTS=2\n' >"$fake/tms/tm-1.env"
good_file() { # the launcher execs taskmanager.sh with exactly these arguments
    local expected
    expected=$(printf '%s\n' start-foreground -D taskmanager.memory.process.size=1536m \
        -D taskmanager.numberOfTaskSlots=2 -D "taskmanager.resource-id=$(uname -n)-tm-1")
    [ "$(launch tm-1)" = "$expected" ]
}
check "good file → start-foreground with memory, slots, resource id" good_file
bad_file() { # bad_file CONTENT: the launcher must exit 78
    printf '%b' "$1" >"$fake/tms/bad.env"
    local rc=0
    launch bad >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 78 ]
}
check "rejects an extra variable (LD_PRELOAD)" bad_file 'TM_PROCESS_MEMORY=1g\nTM_SLOTS=1\nLD_PRELOAD=/tmp/x.so\n'
check "rejects memory with spaces" bad_file 'TM_PROCESS_MEMORY=1g -Dx=y\nTM_SLOTS=1\n'
check "rejects memory with a bad unit" bad_file 'TM_PROCESS_MEMORY=1gb\nTM_SLOTS=1\n'
check "rejects zero slots" bad_file 'TM_PROCESS_MEMORY=1g\nTM_SLOTS=0\n'
check "rejects a missing key" bad_file 'TM_PROCESS_MEMORY=1g\n'
exits_78() { local rc=0; launch "$1" >/dev/null 2>&1 || rc=$?; [ "$rc" -eq 78 ]; }
check "rejects a missing file" exits_78 nope
check "rejects an instance name with a slash" exits_78 ../tms/tm-1

# Class-data sharing: the JVM writes a recording only when it exits, so a test plays that part.
cp "$fake/tms/tm-1.env" "$fake/tms/tm-2.env"
flags() { launch "$1" >/dev/null && cat "$fake/jvm_args"; }
records() { # records INSTANCE: the start asks the JVM to record an archive at exit
    local f
    f=$(flags "$1") && [[ $f =~ -XX:ArchiveClassesAtExit=($fake/cds/taskmanager-[0-9]+\.jsa\.$1\.tmp)$ ]] &&
        echo "${BASH_REMATCH[1]}" >"$fake/recording.$1"
}
maps() { # maps INSTANCE: the start maps the node's one archive
    local f archives
    f=$(flags "$1") || return 1
    archives=("$fake"/cds/taskmanager-*.jsa)
    [ "${#archives[@]}" -eq 1 ] && [ -s "${archives[0]}" ] &&
        [ "$f" = " -XX:SharedArchiveFile=${archives[0]}" ]
}
jvm_wrote() { # jvm_wrote INSTANCE [killed]: its JVM exited (killed mid-dump: no header yet)
    if [ "${2:-}" = killed ]; then head -c 64 /dev/zero; else printf '\xa8\xab\x0b\xf0 regions'; fi \
        >"$(cat "$fake/recording.$1")"
}
no_flags() { local f; f=$(flags tm-1) && [ -z "$f" ]; }
check "class-data sharing: a first start records an archive" records tm-1
check "class-data sharing: another instance records too while none is published" records tm-2
jvm_wrote tm-1 killed
dropped() { records tm-1 && ! compgen -G "$fake/cds/taskmanager-*.jsa" >/dev/null; }
check "class-data sharing: a recording without its header is dropped, recorded again" dropped
jvm_wrote tm-1
check "class-data sharing: the recorder's next start publishes and maps it" maps tm-1
jvm_wrote tm-2 # tm-2's recording JVM exits after tm-1's archive was published
check "class-data sharing: every other instance maps it" maps tm-2
no_recordings() { ! compgen -G "$fake/cds/*.tmp" >/dev/null; }
check "class-data sharing: an instance that maps it drops its own recording" no_recordings
touch -d '2020-01-01' "$fake/flink/lib/flink-dist.jar" # a Flink upgrade: another set of jars
check "class-data sharing: new Flink jars record anew" records tm-1
jvm_wrote tm-1
check "class-data sharing: the new archive replaces the old one" maps tm-1
without_java() { java_home=$fake/none no_flags; }
without_directory() { cds_dir=/etc/passwd/cds no_flags; }
check "class-data sharing: none without a JVM to key it to" without_java
check "class-data sharing: none without a writable directory" without_directory

say "polkit rule for the agent"
ops_apt_install node nodejs
if ! node "$OPS_REPO/tests/ops/polkit-rule.js" "$OPS_REPO/systemd/demeter-agent.polkit.rules"; then
    ops_failures=$((ops_failures + 1))
fi

say "shellcheck"
ops_apt_install shellcheck shellcheck
check "shell scripts clean" shellcheck -x -P "$OPS_REPO/tests/ops" "$OPS_REPO"/tests/ops/*.sh \
    "$OPS_REPO"/tests/ops/boot/*.sh "$OPS_REPO/systemd/flink-taskmanager-start" \
    "$OPS_REPO/packaging/deb/common/postinst" "$OPS_REPO/packaging/deb/common/postrm"

ops_finish systemd
