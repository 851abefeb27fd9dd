#!/usr/bin/env bash
# Runs ansible/site.yml for real against two local test hosts and checks what lands:
#   ctl1  = coordinator + flink_jobmanager + agents (the one-machine case: two certificates),
#           booted: systemd 252 is its PID 1 (systemd-nspawn), its own sshd.service serves
#           Ansible, and the roles really daemon-reload, enable and start units there;
#   node1 = agents with one static TaskManager, a plain root with sshd chrooted into it, no
#           systemd running: the roles install and enable units and say (checked here) that
#           they skip daemon-reload/start/restart.
# Both are Debian 12 roots (debootstrap, cached) under overlays, reached over ssh on
# 127.0.0.1 like any server. Then a second run must report changed=0 and leave every
# certificate byte-identical, and a run with the control node's CA missing must refuse to
# make a new one.
# Flink on node1 comes from the apache-flink 2.3.0 wheel (its real bin/ scripts and conf/,
# 22 MB), passed as a directory in flink_archive_src; the 329 MB jar wheel and Java are left
# out (flink_java_package: ""), since no JVM runs here. ctl1, where flink-jobmanager.service
# really starts, gets the same conf/ with tests/ops/boot/fake-flink.sh as bin/*.sh.
# On ctl1 the Demeter services are enabled and must become active (READY=1 over sd_notify).
source "$(dirname "$0")/lib.sh"
ops_ensure_ansible
ops_build_debs
ops_apt_install openssl openssl

run="$OPS_LAB/run"
hosts=(ctl1 node1)
cleanup() { for h in "${hosts[@]}"; do ops_host_down "$h"; done; }
trap cleanup EXIT
rm -rf "$run"
mkdir -p "$run/host_vars" "$run/ssh"

flink_home="$OPS_LAB/flink-wheel/pyflink"
if [ ! -x "$flink_home/bin/taskmanager.sh" ]; then
    say "fetching Flink's scripts and conf (apache-flink 2.3.0 wheel)"
    "$OPS_VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$OPS_LAB/flink-wheel" \
        --python-version 3.11 --only-binary=:all: --platform manylinux2014_x86_64 apache-flink==2.3.0
fi

pki_command=$(ops_pki_command)

standin="$run/flink-standin" # ctl1's Flink: real conf/, stand-in bin/*.sh
mkdir -p "$standin/bin"
cp -r "$flink_home/conf" "$standin/"
for script in jobmanager.sh taskmanager.sh; do
    install -m 0755 "$OPS_REPO/tests/ops/boot/fake-flink.sh" "$standin/bin/$script"
done


ssh-keygen -q -t ed25519 -N '' -f "$run/ssh/id_ed25519"
declare -A port
for h in "${hosts[@]}"; do
    ops_host_up "$h"
    port[$h]=$(ops_free_port)
done
ops_host_sshd node1 "${port[node1]}" "$run/ssh/id_ed25519.pub"
ops_host_boot_with_sshd ctl1 "${port[ctl1]}" "$run/ssh/id_ed25519.pub"
for h in "${hosts[@]}"; do
    for _ in $(seq 50); do
        ssh -q -i "$run/ssh/id_ed25519" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
            -o BatchMode=yes -p "${port[$h]}" root@127.0.0.1 true 2>/dev/null && break
        sleep 0.2
    done
done

cat >"$run/inventory.yml" <<EOF
all:
  vars:
    ansible_host: 127.0.0.1
    ansible_user: root
    ansible_ssh_private_key_file: $run/ssh/id_ed25519
    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
    ansible_python_interpreter: /usr/bin/python3
    demeter_agent_deb: $OPS_AGENT_DEB
    demeter_coordinator_deb: $OPS_COORDINATOR_DEB
    demeter_pki_command: $pki_command
    flink_archive_src: $flink_home
    flink_java_package: ""
  children:
    coordinator: {hosts: {ctl1: {ansible_port: ${port[ctl1]}}}}
    flink_jobmanager: {hosts: {ctl1: {}}}
    agents: {hosts: {ctl1: {}, node1: {ansible_port: ${port[node1]}}}}
EOF
cat >"$run/host_vars/ctl1.yml" <<EOF
flink_archive_src: $standin
flink_version: 2.3.0-standin
demeter_agent_service_enabled: true
demeter_coordinator_service_enabled: true
EOF
cat >"$run/host_vars/node1.yml" <<'EOF'
flink_taskmanagers:
  - {name: tm-1, process_memory: 1536m, slots: 2, cpu_quota: "200%"}
EOF

playbook() { # playbook LOG: runs site.yml, output in LOG, returns its status
    (cd "$OPS_REPO/ansible" && ANSIBLE_CONFIG="$OPS_REPO/ansible/ansible.cfg" \
        ansible-playbook -i "$run/inventory.yml" site.yml) >"$1" 2>&1
}
recap() { sed -n '/PLAY RECAP/,$p' "$1" | grep -E '^(ctl1|node1) ' | sed 's/  */ /g'; }

timed_run() { # timed_run LOG: playbook with its duration and recap printed; sets rc
    local start
    start=$(date +%s)
    if playbook "$1"; then rc=0; else rc=$?; fi
    say "  ($(($(date +%s) - start)) s)"
    recap "$1" | sed 's/^/  /'
}

say "run 1: ansible-playbook site.yml"
timed_run "$run/run1.log"
rc1=$rc
check "run 1 succeeds" test "$rc1" -eq 0
[ "$rc1" -eq 0 ] || tail -40 "$run/run1.log"
check "node1: roles say that systemd is not running and starts are skipped" \
    grep -q 'systemd is not running on node1' "$run/run1.log"
check "ctl1: no such message (systemd runs there)" bash -c "! grep -q 'systemd is not running on ctl1' '$run/run1.log'"

in_root() { local h=$1; shift; chroot "$OPS_HOSTS_DIR/$h/root" "$@"; }
has_mode() { # has_mode HOST PATH "MODE USER:GROUP"
    [ "$(in_root "$1" stat -c '%a %U:%G' "$2")" = "$3" ]
}
say "what landed"
for h in "${hosts[@]}"; do
    check "$h: demeter is a system user (uid < 1000)" bash -c "[ \$(chroot '$OPS_HOSTS_DIR/$h/root' id -u demeter) -lt 1000 ]"
    check "$h: flink is a system user" bash -c "[ \$(chroot '$OPS_HOSTS_DIR/$h/root' id -u flink) -lt 1000 ]"
    check "$h: demeter-agent installed" in_root "$h" dpkg-query -W demeter-agent
    check "$h: /usr/bin/demeter-agent" in_root "$h" test -x /usr/bin/demeter-agent
    check "$h: /etc/demeter/tls 0750 root:demeter" has_mode "$h" /etc/demeter/tls "750 root:demeter"
    check "$h: ca.pem 0644 root:root" has_mode "$h" /etc/demeter/tls/ca.pem "644 root:root"
    check "$h: node.pem 0644 root:root" has_mode "$h" /etc/demeter/tls/node.pem "644 root:root"
    check "$h: node.key 0640 root:demeter" has_mode "$h" /etc/demeter/tls/node.key "640 root:demeter"
    check "$h: node.pem signed by the cluster CA" \
        openssl verify -CAfile "$run/pki/ca.pem" "$OPS_HOSTS_DIR/$h/root/etc/demeter/tls/node.pem"
    check "$h: node.key matches node.pem" bash -c "
        [ \"\$(openssl pkey -in '$OPS_HOSTS_DIR/$h/root/etc/demeter/tls/node.key' -pubout)\" = \
          \"\$(openssl x509 -in '$OPS_HOSTS_DIR/$h/root/etc/demeter/tls/node.pem' -noout -pubkey)\" ]"
    check "$h: agent.toml 0640 root:demeter" has_mode "$h" /etc/demeter/agent.toml "640 root:demeter"
    check "$h: polkit rule installed" in_root "$h" test -f /usr/share/polkit-1/rules.d/60-demeter-agent.rules
    version=2.3.0
    [ "$h" = ctl1 ] && version=2.3.0-standin
    check "$h: /opt/flink -> /opt/flink-$version" bash -c "[ \$(readlink '$OPS_HOSTS_DIR/$h/root/opt/flink') = /opt/flink-$version ]"
    check "$h: Flink scripts executable" in_root "$h" test -x /opt/flink/bin/taskmanager.sh
    check "$h: /etc/flink/config.yaml 0640 root:flink" has_mode "$h" /etc/flink/config.yaml "640 root:flink"
    check "$h: config.yaml keeps the distribution's Java options" \
        grep -q 'add-opens=java.base/java.lang=ALL-UNNAMED' "$OPS_HOSTS_DIR/$h/root/etc/flink/config.yaml"
    check "$h: config.yaml points at the JobManager" \
        grep -Pzq 'rpc:\n\s+address: 127.0.0.1\n\s+port: 6123' "$OPS_HOSTS_DIR/$h/root/etc/flink/config.yaml"
    check "$h: config.yaml runs the adaptive scheduler (in-place rescales)" \
        grep -Pq '^\s+scheduler: adaptive$' "$OPS_HOSTS_DIR/$h/root/etc/flink/config.yaml"
    check "$h: /etc/flink/taskmanagers 0775 root:demeter" has_mode "$h" /etc/flink/taskmanagers "775 root:demeter"
    check "$h: TaskManager launcher 0755" has_mode "$h" /usr/local/libexec/flink-taskmanager-start "755 root:root"
    check "$h: flink-taskmanager@.service installed" in_root "$h" test -f "/etc/systemd/system/flink-taskmanager@.service"
done
check "ctl1: demeter-coordinator installed" in_root ctl1 test -x /usr/bin/demeter-coordinator
check "ctl1: coordinator.toml 0640 root:demeter" has_mode ctl1 /etc/demeter/coordinator.toml "640 root:demeter"
check "ctl1: coordinator.toml has the Flink REST URL" \
    grep -q 'rest_url = "http://127.0.0.1:8081"' "$OPS_HOSTS_DIR/ctl1/root/etc/demeter/coordinator.toml"
check "ctl1: agent certificate apart (agent.key 0640 root:demeter)" has_mode ctl1 /etc/demeter/tls/agent.key "640 root:demeter"
check "ctl1: agent.toml uses agent.pem and names itself ctl1-agent" bash -c "
    grep -q 'cert = \"/etc/demeter/tls/agent.pem\"' '$OPS_HOSTS_DIR/ctl1/root/etc/demeter/agent.toml' &&
    grep -q 'Node name (from its certificate): ctl1-agent' '$OPS_HOSTS_DIR/ctl1/root/etc/demeter/agent.toml'"
check "node1: agent.toml uses node.pem" \
    grep -q 'cert = "/etc/demeter/tls/node.pem"' "$OPS_HOSTS_DIR/node1/root/etc/demeter/agent.toml"
check "node1: demeter-agent.service enabled (offline)" \
    in_root node1 test -L /etc/systemd/system/multi-user.target.wants/demeter-agent.service
ct() { ops_in_host ctl1 "$@"; }
not() { ! "$@"; }
check "ctl1: flink-jobmanager.service enabled" ct systemctl is-enabled flink-jobmanager.service
check "ctl1: flink-jobmanager.service started by the role" ct systemctl is-active flink-jobmanager.service
jobmanager_runs_as_flink() {
    local pid
    pid=$(ct systemctl show -p MainPID --value flink-jobmanager.service)
    [ "$pid" -gt 0 ] && [ "$(ct stat -c %U "/proc/$pid")" = flink ]
}
check "ctl1: the JobManager runs as flink" jobmanager_runs_as_flink
for svc in demeter-agent demeter-coordinator; do
    check "ctl1: $svc enabled" ct systemctl is-enabled "$svc.service"
    check "ctl1: $svc active" ct systemctl is-active "$svc.service"
done
check "node1: no JobManager enabled" \
    in_root node1 test ! -e /etc/systemd/system/multi-user.target.wants/flink-jobmanager.service
check "node1: tm-1.env has memory and slots" bash -c "
    grep -qx 'TM_PROCESS_MEMORY=1536m' '$OPS_HOSTS_DIR/node1/root/etc/flink/taskmanagers/tm-1.env' &&
    grep -qx 'TM_SLOTS=2' '$OPS_HOSTS_DIR/node1/root/etc/flink/taskmanagers/tm-1.env'"
check "node1: tm-1 limits MemoryMax=1690M CPUQuota=200%" bash -c "
    f='$OPS_HOSTS_DIR/node1/root/etc/systemd/system/flink-taskmanager@tm-1.service.d/50-resources.conf'
    grep -qx 'MemoryMax=1690M' \"\$f\" && grep -qx 'CPUQuota=200%' \"\$f\""
check "node1: tm-1 enabled" \
    in_root node1 test -L "/etc/systemd/system/multi-user.target.wants/flink-taskmanager@tm-1.service"
check "control node: PKI directory 0700" bash -c "[ \$(stat -c %a '$run/pki') = 700 ]"

fingerprints() { # every certificate and key, on the control node and on the hosts
    sha256sum "$run"/pki/*.pem "$run"/pki/*.key "$OPS_HOSTS_DIR"/*/root/etc/demeter/tls/*
}
fingerprints >"$run/fingerprints.1"

say "run 2: the same again must change nothing"
timed_run "$run/run2.log"
rc2=$rc
check "run 2 succeeds" test "$rc2" -eq 0
check "run 2 reports changed=0 on every host" bash -c "
    [ \$(sed -n '/PLAY RECAP/,\$p' '$run/run2.log' | grep -cE '^(ctl1|node1) .* changed=0 .* failed=0 ') -eq 2 ]"
if ! grep -q 'changed=0' <(recap "$run/run2.log"); then grep -B2 '^changed:' "$run/run2.log" | head -40; fi
fingerprints >"$run/fingerprints.2"
check "no CA, certificate or key was re-issued or replaced" cmp -s "$run/fingerprints.1" "$run/fingerprints.2"

say "run 3: the control node lost its CA; nodes still trust the old one"
mv "$run/pki" "$run/pki.saved"
if playbook "$run/run3.log"; then rc3=0; else rc3=$?; fi
check "run 3 fails instead of creating a new CA" test "$rc3" -ne 0
check "... saying why" grep -q 'Restore the PKI directory' "$run/run3.log"
check "... and no new CA appeared" test ! -e "$run/pki/ca.pem"
rm -rf "$run/pki"
mv "$run/pki.saved" "$run/pki"

ops_finish ansible-run
