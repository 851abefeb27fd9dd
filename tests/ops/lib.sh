# shellcheck shell=bash
# Shared helpers for tests/ops/*.sh. Sourced, not run. Each test installs what it lacks,
# non-interactively, and keeps its scratch state under the git-ignored .lab/ops/.

set -euo pipefail
export DEBIAN_FRONTEND=noninteractive CI="${CI:-true}"

OPS_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OPS_LAB="$OPS_REPO/.lab/ops"
# Built Debian roots outlive a clone (CI clones afresh): cache them per machine.
OPS_CACHE="${DEMETER_OPS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/var/cache}/.cache}/demeter-ops}"
OPS_VENV="$OPS_LAB/venv"
OPS_CARGO_DEB_VERSION=3.8.0
# The Cargo profile the .debs are made from. release by default (what an operator ships);
# scripts/test.sh sets dev: its debug binaries are already built, and a second, optimised build
# of both binaries (~10 CPU-minutes) beside the Rust and Flink tests slowed the whole suite on 2
# cores. What the ops tests check (files, modes, users, units, Ansible's runs) is the same for
# both. cargo-deb warns that dev is meant for development: it is.
OPS_PROFILE="${OPS_PROFILE:-release}"
case "$OPS_PROFILE" in release) OPS_TARGET_DIR=release ;; dev) OPS_TARGET_DIR=debug ;;
    *) echo "OPS_PROFILE must be release or dev, not $OPS_PROFILE" >&2; exit 2 ;; esac
OPS_ANSIBLE_CORE_VERSION=2.19.14
OPS_ANSIBLE_LINT_VERSION=26.10.1
# Packages of the test hosts: what Ansible needs on a target, what the roles install
# (so that no test run downloads them), what the .debs depend on.
OPS_BASE_PACKAGES=python3,python3-apt,openssh-server,systemd,dbus,libpam-systemd,polkitd
mkdir -p "$OPS_LAB" "$OPS_CACHE"

ops_failures=0
say() { printf '%s\n' "$*"; }
check() { # check "what" command...: prints PASS/FAIL and counts failures
    local what=$1
    shift
    if "$@" >/dev/null 2>&1; then
        say "  PASS  $what"
    else
        say "  FAIL  $what"
        ops_failures=$((ops_failures + 1))
    fi
}
ops_finish() { # closing line, exit status
    if [ "$ops_failures" -eq 0 ]; then
        say "$1: all checks passed"
    else
        say "$1: $ops_failures check(s) failed"
        exit 1
    fi
}

ops_apt_install() { # ops_apt_install CMD PACKAGE: install PACKAGE unless CMD exists
    command -v "$1" >/dev/null 2>&1 && return 0
    say "installing $2 (for $1)"
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

ops_python() { # a Python the pinned ansible-core supports (3.11 to 3.13)
    local py
    for py in python3.13 python3.12 python3.11; do
        # pyenv shims exist for versions that are not active: ask the interpreter itself.
        if "$py" -c 'import sys' >/dev/null 2>&1; then
            "$py" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    say "no python3.11+ found" >&2
    return 1
}

ops_ensure_ansible() { # venv with pinned ansible-core and ansible-lint
    local have # (whole output first: grep -q closing the pipe early makes them fail)
    have="$(NO_COLOR=1 "$OPS_VENV/bin/ansible-lint" --nocolor --version 2>/dev/null || true)"
    if [[ $have != *"ansible-lint $OPS_ANSIBLE_LINT_VERSION using ansible-core:$OPS_ANSIBLE_CORE_VERSION "* ]]; then
        say "installing ansible-core $OPS_ANSIBLE_CORE_VERSION and ansible-lint $OPS_ANSIBLE_LINT_VERSION into $OPS_VENV"
        "$(ops_python)" -m venv "$OPS_VENV"
        "$OPS_VENV/bin/pip" install -q --disable-pip-version-check \
            "ansible-core==$OPS_ANSIBLE_CORE_VERSION" "ansible-lint==$OPS_ANSIBLE_LINT_VERSION"
    fi
    export PATH="$OPS_VENV/bin:$PATH" ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
}

ops_build_debs() { # binaries ($OPS_PROFILE) + both .debs; sets OPS_AGENT_DEB, OPS_COORDINATOR_DEB
    if ! cargo deb --version 2>/dev/null | grep -q "$OPS_CARGO_DEB_VERSION"; then
        say "installing cargo-deb $OPS_CARGO_DEB_VERSION"
        cargo install --quiet --locked cargo-deb --version "$OPS_CARGO_DEB_VERSION"
    fi
    say "building demeter-agent and demeter-coordinator ($OPS_PROFILE) and their .debs"
    local pkg log="$OPS_LAB/cargo-build.log"
    # --workspace --bins (the two binaries) as scripts/test.sh builds them: the same features
    # resolve, so in dev this reuses that build instead of compiling a second variant.
    (cd "$OPS_REPO" && cargo build --profile "$OPS_PROFILE" --workspace --bins) \
        >"$log" 2>&1 || { tail -30 "$log"; return 1; }
    for pkg in demeter-agent demeter-coordinator; do
        (cd "$OPS_REPO" && cargo deb --no-build --profile "$OPS_PROFILE" -p "$pkg" \
            --output "$OPS_LAB/debs/$pkg.deb") >>"$log" 2>&1 ||
            { tail -30 "$log"; return 1; }
    done
    export OPS_AGENT_DEB="$OPS_LAB/debs/demeter-agent.deb"
    export OPS_COORDINATOR_DEB="$OPS_LAB/debs/demeter-coordinator.deb"
}

ops_base_root() { # prints a cached, never-modified Debian 12 root (debootstrap, ~4 min once)
    local key root
    key=$(printf '%s' "bookworm-minbase-$OPS_BASE_PACKAGES" | sha256sum | cut -c1-12)
    root="$OPS_CACHE/base-$key"
    if [ ! -f "$root.done" ]; then
        ops_apt_install debootstrap debootstrap
        say "debootstrapping the test hosts' Debian 12 root into $root (once per machine)" >&2
        rm -rf "$root"
        debootstrap --variant=minbase --include="$OPS_BASE_PACKAGES" bookworm "$root" \
            http://deb.debian.org/debian >"$OPS_CACHE/debootstrap.log" 2>&1 ||
            { tail -20 "$OPS_CACHE/debootstrap.log" >&2; return 1; }
        rm -f "$root"/etc/ssh/ssh_host_*key* # each host gets its own, see ops_host_up
        touch "$root.done"
    fi
    printf '%s\n' "$root"
}

# Test hosts: an overlay of the base root per host (instant, the base stays clean), with
# /proc and /dev, reached by Ansible over ssh (sshd chrooted into it, 127.0.0.1:<port>).
# There is no systemd as PID 1 in them: no /run/systemd/system, as in any chroot.
OPS_HOSTS_DIR="$OPS_LAB/hosts"
ops_host_up() { # ops_host_up NAME: mounts $OPS_HOSTS_DIR/NAME/root
    local name=$1 dir="$OPS_HOSTS_DIR/$1"
    ops_host_down "$name"
    rm -rf "$dir"
    mkdir -p "$dir/upper" "$dir/work" "$dir/root"
    ops_host_mount_root "$name"
    mount -t proc proc "$dir/root/proc"
    mount --bind /dev "$dir/root/dev"
    mount -t tmpfs -o mode=0755 tmpfs "$dir/root/run"
    cp /etc/resolv.conf "$dir/root/etc/resolv.conf"
    printf '%s\n' "$name" >"$dir/root/etc/hostname"
}
ops_host_mount_root() { # the overlay alone, without /proc, /dev, /run
    local dir="$OPS_HOSTS_DIR/$1"
    [ -f "$dir/copied" ] && return 0 # the fallback below: the root is a plain copy, already there
    local opts
    opts="lowerdir=$(ops_base_root),upperdir=$dir/upper,workdir=$dir/work"
    # On a fresh machine the first overlay mounts were seen to fail with "special device overlay
    # does not exist" (the filesystem not yet registered; one retry after 1 s was not always
    # enough, and there may be no modprobe); later ones worked. Load it and retry for a while.
    # DEMETER_OPS_NO_OVERLAY=1 takes the copy fallback below at once (to test it).
    local attempt
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        [ "${DEMETER_OPS_NO_OVERLAY:-}" = 1 ] && break
        mount -t overlay overlay -o "$opts" "$dir/root" 2>/dev/null && return 0
        [ "$attempt" = 1 ] && { modprobe overlay 2>/dev/null || true; }
        sleep 1
    done
    # A kernel without overlayfs (seen on one CI machine): a full copy of the base instead — slower
    # (seconds) but the same clean host; ops_host_up's rm -rf starts the next one afresh.
    say "  overlayfs unavailable here; copying the base root for host $1" >&2
    cp -a "$(ops_base_root)/." "$dir/root/" && touch "$dir/copied"
}
ops_host_down() { # stop NAME's sshd or booted systemd, unmount its root; no-op when down
    local dir="$OPS_HOSTS_DIR/$1" pid
    if [ -f "$dir/sshd.pid" ]; then
        kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
        rm -f "$dir/sshd.pid"
    fi
    # What still runs chrooted there (sshd sessions kept by Ansible's ssh ControlPersist).
    for pid in $(ps -e -o pid=); do
        if [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$dir/root" ]; then kill "$pid" 2>/dev/null || true; fi
    done
    if [ -f "$dir/nspawn.pid" ]; then
        pid=$(cat "$dir/nspawn.pid")
        if kill -TERM "$pid" 2>/dev/null; then # nspawn shuts the container down cleanly
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/nspawn.pid" "$dir/init.pid"
    fi
    local m
    for m in run dev proc ""; do
        if mountpoint -q "$dir/root/$m" 2>/dev/null; then umount -l "$dir/root/$m"; fi
    done
}
ops_host_sshd() { # ops_host_sshd NAME PORT PUBKEY: root login with that key only
    local name=$1 port=$2 pubkey=$3 root="$OPS_HOSTS_DIR/$1/root"
    install -d -m 0700 "$root/root/.ssh"
    install -m 0600 "$pubkey" "$root/root/.ssh/authorized_keys"
    install -d -m 0755 "$root/run/sshd"
    chroot "$root" ssh-keygen -q -A >/dev/null
    chroot "$root" /usr/sbin/sshd -D -e -p "$port" -o ListenAddress=127.0.0.1 \
        -o PasswordAuthentication=no -o PermitRootLogin=prohibit-password \
        >"$OPS_HOSTS_DIR/$name/sshd.log" 2>&1 &
    printf '%s\n' "$!" >"$OPS_HOSTS_DIR/$name/sshd.pid"
}
ops_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Booted test hosts: real systemd as PID 1 of a container (systemd-nspawn) on NAME's root.
ops_descends_from() { # ops_descends_from PID ANCESTOR
    local p=$1
    while [ "$p" -gt 1 ]; do
        [ "$p" = "$2" ] && return 0
        p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || return 1
    done
    return 1
}
ops_host_boot() { # ops_host_boot NAME: boots the (prepared) root; waits for multi-user
    # OPS_NSPAWN_ARGS: more systemd-nspawn options (e.g. --bind-ro=PATH), split on spaces.
    local name=$1 dir="$OPS_HOSTS_DIR/$1" nspawn_pid init_pid='' p state=''
    ops_apt_install systemd-nspawn systemd-container
    ops_host_down "$name" # nspawn mounts /proc, /dev and /run itself
    ops_host_mount_root "$name"
    # nspawn needs /run/systemd on a tmpfs, and this host has no systemd: a private /run.
    unshare -m sh -c "mount --make-rprivate / && mount -t tmpfs tmpfs /run &&
        exec systemd-nspawn -q -D '$dir/root' ${OPS_NSPAWN_ARGS:-} --register=no --keep-unit --console=passive -b" \
        >"$dir/console.log" 2>&1 </dev/null &
    nspawn_pid=$!
    printf '%s\n' "$nspawn_pid" >"$dir/nspawn.pid"
    for _ in $(seq 150); do
        for p in $(pgrep -x systemd); do
            if ops_descends_from "$p" "$nspawn_pid"; then init_pid=$p && break 2; fi
        done
        sleep 0.2
    done
    [ -n "$init_pid" ] || { cat "$dir/console.log"; say "$name: container did not start"; return 1; }
    printf '%s\n' "$init_pid" >"$dir/init.pid"
    for _ in $(seq 150); do
        state=$(ops_in_host "$name" systemctl is-system-running 2>/dev/null || true)
        case $state in running | degraded) break ;; esac
        sleep 0.4
    done
    say "  $name: systemd $(ops_in_host "$name" systemctl --version | head -1 | cut -d' ' -f2) is PID 1, system $state"
    case $state in running | degraded) return 0 ;; *) cat "$dir/console.log"; return 1 ;; esac
}
ops_in_host() { # ops_in_host NAME CMD...: run CMD in NAME's booted container
    local name=$1
    shift
    nsenter -t "$(cat "$OPS_HOSTS_DIR/$name/init.pid")" -m -u -i -p -C -- "$@"
}
ops_host_boot_with_sshd() { # ops_host_boot_with_sshd NAME PORT PUBKEY: boot, sshd.service on PORT
    local name=$1 port=$2 pubkey=$3 root="$OPS_HOSTS_DIR/$1/root"
    install -d -m 0700 "$root/root/.ssh"
    install -m 0600 "$pubkey" "$root/root/.ssh/authorized_keys"
    chroot "$root" ssh-keygen -q -A >/dev/null
    printf 'Port %s\nListenAddress 127.0.0.1\nPasswordAuthentication no\n' "$port" \
        >"$root/etc/ssh/sshd_config.d/50-ops-test.conf"
    ops_host_boot "$name"
}
ops_pki_command() { # prints the command implementing `certs init|issue` for the tests
    printf '%s\n' "$OPS_REPO/target/$OPS_TARGET_DIR/demeter-coordinator"
}
