#!/usr/bin/env bash
# Builds the two .debs with cargo-deb and installs, removes and purges them with dpkg in a
# scratch Debian 12 root (an overlay or copy of the cached test-host root: this machine's own
# packages and users are never touched). Checks files, modes, the shared demeter user, that
# the services are neither enabled nor started by the package, and that purging the last
# package leaves nothing of Demeter behind.
source "$(dirname "$0")/lib.sh"
ops_build_debs

host=debtest
trap 'ops_host_down "$host"' EXIT
ops_host_up "$host"
root="$OPS_HOSTS_DIR/$host/root"
cp "$OPS_AGENT_DEB" "$OPS_COORDINATOR_DEB" "$root/tmp/"
in_root() { chroot "$root" "$@"; }
has_mode() { [ "$(in_root stat -c '%a %U:%G' "$1")" = "$2" ]; }
dpkg_in_root() { # dpkg_in_root ARGS...: dpkg in the root, output kept for the report
    in_root dpkg "$@" >>"$OPS_LAB/deb-dpkg.log" 2>&1
}
: >"$OPS_LAB/deb-dpkg.log"

say "package contents"
for deb in "$OPS_AGENT_DEB" "$OPS_COORDINATOR_DEB"; do
    say "  $(basename "$deb"): $(dpkg-deb -f "$deb" Package Version Depends | tr '\n' ' ')"
done
check "agent .deb ships binary, unit, sysusers, polkit rule, conffile" bash -c "
    c=\$(dpkg-deb -c '$OPS_AGENT_DEB') &&
    grep -q ' ./usr/bin/demeter-agent\$' <<<\"\$c\" &&
    grep -qE ' ./(usr/)?lib/systemd/system/demeter-agent.service\$' <<<\"\$c\" &&
    grep -qE ' ./usr/lib/sysusers.d/demeter-agent.conf\$' <<<\"\$c\" &&
    grep -q ' ./usr/share/polkit-1/rules.d/60-demeter-agent.rules\$' <<<\"\$c\" &&
    grep -q ' ./etc/demeter/agent.toml\$' <<<\"\$c\""
check "agent .deb marks /etc/demeter/agent.toml as a conffile" bash -c \
    "dpkg-deb --ctrl-tarfile '$OPS_AGENT_DEB' | tar -xO ./conffiles | grep -qx /etc/demeter/agent.toml"
check "coordinator .deb ships binary, unit, conffile" bash -c "
    c=\$(dpkg-deb -c '$OPS_COORDINATOR_DEB') &&
    grep -q ' ./usr/bin/demeter-coordinator\$' <<<\"\$c\" &&
    grep -qE ' ./(usr/)?lib/systemd/system/demeter-coordinator.service\$' <<<\"\$c\" &&
    grep -q ' ./etc/demeter/coordinator.toml\$' <<<\"\$c\""

say "dpkg -i demeter-agent, then demeter-coordinator"
check "dpkg -i demeter-agent" dpkg_in_root -i /tmp/demeter-agent.deb
check "demeter is a system user with its own group" bash -c "
    [ \$(chroot '$root' id -u demeter) -lt 1000 ] && [ \$(chroot '$root' id -gn demeter) = demeter ]"
check "demeter has no login shell" bash -c "chroot '$root' getent passwd demeter | grep -q ':/usr/sbin/nologin\$'"
check "/usr/bin/demeter-agent 0755" has_mode /usr/bin/demeter-agent "755 root:root"
check "agent.toml 0640 root:demeter" has_mode /etc/demeter/agent.toml "640 root:demeter"
check "unit installed" bash -c "chroot '$root' test -f /lib/systemd/system/demeter-agent.service"
check "unit not enabled by the package (needs certificates first)" \
    bash -c "! chroot '$root' find /etc/systemd/system -name 'demeter-agent.service' | grep -q ."
check "dpkg -i demeter-coordinator" dpkg_in_root -i /tmp/demeter-coordinator.deb
check "/usr/bin/demeter-coordinator 0755" has_mode /usr/bin/demeter-coordinator "755 root:root"
check "coordinator.toml 0640 root:demeter" has_mode /etc/demeter/coordinator.toml "640 root:demeter"
check "reinstalling the same version works" dpkg_in_root -i /tmp/demeter-agent.deb

say "dpkg -r / -P"
echo '# an administrator edit' >>"$root/etc/demeter/agent.toml"
check "dpkg -r demeter-agent" dpkg_in_root -r demeter-agent
check "binary removed" in_root test ! -e /usr/bin/demeter-agent
check "polkit rule removed" in_root test ! -e /usr/share/polkit-1/rules.d/60-demeter-agent.rules
check "edited conffile kept after -r" grep -q 'an administrator edit' "$root/etc/demeter/agent.toml"
check "user kept while demeter-coordinator is installed" in_root id demeter
check "dpkg -P demeter-agent" dpkg_in_root -P demeter-agent
check "conffile gone after -P" in_root test ! -e /etc/demeter/agent.toml
check "user still kept (demeter-coordinator installed)" in_root id demeter
mkdir -p "$root/var/lib/demeter" && echo state >"$root/var/lib/demeter/store.redb"
check "dpkg -r demeter-coordinator" dpkg_in_root -r demeter-coordinator
check "dpkg -P demeter-coordinator" dpkg_in_root -P demeter-coordinator
check "user and group removed with the last package" bash -c \
    "! chroot '$root' getent passwd demeter && ! chroot '$root' getent group demeter"
check "state /var/lib/demeter purged" in_root test ! -e /var/lib/demeter
check "/etc/demeter removed" in_root test ! -e /etc/demeter
# The merged root, not the overlay's upper layer: the host may be a plain copy (no overlayfs).
# -xdev leaves out the mounted /proc, /dev and /run.
leftovers=$(find "$root" -xdev -path "$root/tmp" -prune -o -name '*demeter*' -print)
check "nothing named *demeter* left in the root (outside /tmp)" test -z "$leftovers"
[ -z "$leftovers" ] || say "  left: $leftovers"
if [ "$ops_failures" -ne 0 ]; then cat "$OPS_LAB/deb-dpkg.log"; fi

ops_finish deb
