#!/bin/sh
# Runs as ExecStart of demeter-coordinator-probe.service, a copy of demeter-coordinator.service
# (same user and sandbox) made by tests/ops/systemd-boot.sh. Tries what the coordinator needs
# and what it must not do; writes NAME=yes|no lines to its state dir.
out=/var/lib/demeter/probe.out
: >"$out"
try() {
    name=$1
    shift
    if "$@" >/dev/null 2>&1; then echo "$name=yes" >>"$out"; else echo "$name=no" >>"$out"; fi
}
bind() { python3 -c "import socket, sys; s = socket.socket(socket.AF_INET, socket.$1); s.bind(('$2', $3))"; }

try read_config cat /etc/demeter/coordinator.toml
try read_key cat /etc/demeter/tls/node.key
try write_state sh -c 'echo x >/var/lib/demeter/probe.tmp && rm /var/lib/demeter/probe.tmp'
try write_tmp sh -c 'echo x >/tmp/probe'
try bind_quic_udp_7443 bind SOCK_DGRAM 0.0.0.0 7443
try bind_http_tcp_7480 bind SOCK_STREAM 127.0.0.1 7480
try see_pid_1 test -e /proc/1/stat
try read_shadow grep -q "^root:" /etc/shadow
try write_etc sh -c 'echo x >/etc/demeter/probe'
try write_home sh -c 'echo x >/root/probe'
echo done=yes >>"$out"
