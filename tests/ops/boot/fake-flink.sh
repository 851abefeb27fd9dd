#!/bin/sh
# Stand-in for /opt/flink/bin/{jobmanager,taskmanager}.sh in tests/ops/systemd-boot.sh (no
# JVM there): records its arguments where a JVM keeps its hsperfdata file (mode 0600 in
# /tmp/hsperfdata_<user>/<pid>), then stays up as the unit's main process.
set -eu
dir=/tmp/hsperfdata_$(id -un)
mkdir -p "$dir"
chmod 0755 "$dir"
printf '%s\n' "$*" >"$dir/$$"
chmod 0600 "$dir/$$"
exec sleep infinity
