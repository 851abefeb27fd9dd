#!/usr/bin/env bash
# Runs every ops test (or those named: run-all.sh systemd deb) and closes with the line CI
# reads, "N passed, N failed". Each test prints its own checks.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(systemd ansible-lint deb systemd-boot ansible-run flink-units)
passed=0 failed=0
for t in "${tests[@]}"; do
    echo "=== tests/ops/$t.sh"
    start=$(date +%s)
    if "$here/$t.sh" </dev/null; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    echo "=== tests/ops/$t.sh took $(($(date +%s) - start)) s"
done
echo "ops: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
