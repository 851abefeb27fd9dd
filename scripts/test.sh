#!/usr/bin/env bash
# The whole test suite, on a fresh machine or in CI (CI=true, no stdin): installs what it needs,
# then runs format and lint checks, the Rust tests (unit, property, end-to-end over QUIC, and
# against a real local Flink 2.3 cluster this script installs and starts, including the README's
# first command run as an end-to-end test), the operations tests (systemd, Ansible, .deb) and a
# short fuzz run. scripts/smoke-flink.sh (the bare Flink chain through curl) is not run here:
# the executor tests cover run, savepoint, rescale, a killed TaskManager and exactly-once
# output through Demeter itself.
#
#   scripts/test.sh            everything
#   SKIP_OPS=1 scripts/test.sh   without the systemd/Ansible/.deb tests
#   FUZZ_SECONDS=0 …             without the fuzz run (it runs when cargo-fuzz is installed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# A clean CI build never reuses incremental state: skip writing it (time and gigabytes).
[ "${CI:-}" = true ] && export CARGO_INCREMENTAL=0
unset RUST_BACKTRACE
started=$(date +%s)
step() { printf '\n==> [%4ss] %s\n' "$(( $(date +%s) - started ))" "$*"; }

step "toolchain"
# rust-toolchain.toml pins 1.95.0; machines of this kind ship it as stable, so link it if the
# pinned name is missing instead of downloading.
if ! rustup run 1.95.0 rustc --version >/dev/null 2>&1; then
  stable=$(rustup toolchain list | awk '/^stable/{print $1; exit}')
  rustup toolchain link 1.95.0 "$(rustup run "$stable" rustc --print sysroot)"
fi
rustc --version

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "build the binaries the end-to-end tests start"
cargo build --workspace --bins

# The README's generalisation figures come from 18-hour replays on the release build; here two
# hours of every trace on the debug build check that the script and `simulate --json` agree.
step "scripts/generalisation.py: 2-hour replays of each trace (the script runs; no figures)"
python3 scripts/generalisation.py --binary target/debug/demeter-coordinator --hours 2 >/dev/null
step "scripts/twin-sweep.py: one drawn job, one hour of each trace (the script runs; no figures)"
python3 scripts/twin-sweep.py --binary target/debug/demeter-coordinator --twins 1 --hours 1 \
  --out .lab/twin-sweep >/dev/null

mkdir -p .lab
ops_pid=
if [ "${SKIP_OPS:-0}" != 1 ]; then
  # The operations tests mostly wait on the network (debootstrap, pip) and on booted test
  # hosts, so they run beside the Rust and Flink tests; their log is replayed at the end.
  step "operations tests (systemd, Ansible, .deb) started in the background: .lab/ops.log"
  # OPS_PROFILE=dev: the .debs are made from the debug binaries built above (tests/ops/lib.sh).
  OPS_PROFILE=dev tests/ops/run-all.sh >.lab/ops.log 2>&1 &
  ops_pid=$!
fi

step "real Flink 2.3: install into .lab, build the benchmark job, start a session cluster"
scripts/flink-lab.sh install
scripts/build-job.sh
stop_ci_cluster() { scripts/flink-lab.sh stop ci >/dev/null 2>&1 || true; }
on_exit() {
  stop_ci_cluster
  if [ -n "$ops_pid" ] && kill -0 "$ops_pid" 2>/dev/null; then kill "$ops_pid" 2>/dev/null || true; fi
}
trap on_exit EXIT
scripts/flink-lab.sh start ci --rest-port 18091 --rpc-port 16191 --taskmanagers 1 --slots 2
eval "$(scripts/flink-lab.sh env ci)"
export DEMETER_FLINK_REST=$FLINK_REST_URL
# scripts/test-lanes.py runs the test binaries: the fast ones and then the daemon test beside the
# executor test, then the profiling and tuning tests one at a time (beside each other they starve
# the jobs they measure).
# Ports, so lanes never collide:
# the executor test (tests/tests/executor_flink.rs) starts its own JobManager from this lab on
# REST 18291 / RPC 16291 and runs its TaskManagers itself; the daemon test
# (tests/tests/daemon_flink.rs) starts one on REST 18391 / RPC 16391 whose TaskManagers a real
# agent runs on the coordinator daemon's orders (~3 min).
# The profiling test (tests/tests/profiling_flink.rs, ~3.5 min) starts a production cluster on
# REST 18491 / RPC 16491 and runs a batch of two profiling copies on REST 18500-18519 / RPC
# 16500-16519. The tuning test (tests/tests/tuning_flink.rs, 5-8 min, capped at 11) runs scripts/run-local.sh
# with the debug binaries: REST 18591 / RPC 16591, profiling copies on 18600-18609 / 16600-16609.
# The agent's supervisor test (agent/tests/supervisor_flink.rs) uses REST 18281 / RPC 16281, the
# REST client's test (coordinator/tests/flink_real.rs) the session cluster above. Beside them,
# the operations test tests/ops/flink-units.sh runs Flink under its systemd units on REST 18781 /
# RPC 16781.
export DEMETER_LAB="$PWD/.lab"

step "cargo test: build the test binaries"
cargo test --workspace --no-run --message-format=json >.lab/test-binaries.json 2>.lab/test-build.log \
  || { tail -50 .lab/test-build.log >&2; exit 1; }
step "cargo test (workspace) in lanes: the fast binaries, then the daemon test, beside the executor test; then the profiling and tuning tests in turn; logs in .lab/tests/"
python3 scripts/test-lanes.py .lab/test-binaries.json .lab/tests
step "doc tests"
cargo test --workspace --doc >.lab/doc-tests.log 2>&1 || { tail -50 .lab/doc-tests.log >&2; exit 1; }
grep -E '^(   Doc-tests|running [0-9]+ tests?$|test |test result)' .lab/doc-tests.log || true
stop_ci_cluster

if [ -n "$ops_pid" ]; then
  step "operations tests: waiting for them to finish"
  ops_status=0
  wait "$ops_pid" || ops_status=$?
  cat .lab/ops.log
  [ "$ops_status" -eq 0 ] || { echo "operations tests failed" >&2; exit 1; }
fi

# The fuzz run needs cargo-fuzz and a second build of the protocol crates with coverage
# instrumentation (minutes on 2 cores): it runs when cargo-fuzz is installed or FUZZ_SECONDS is
# set. The property tests above already feed the decoder random bytes on every run.
if [ -n "${FUZZ_SECONDS:-}" ] || command -v cargo-fuzz >/dev/null; then
  fuzz_seconds=${FUZZ_SECONDS:-30}
  if [ "$fuzz_seconds" -gt 0 ]; then
    step "fuzz the frame decoder for ${fuzz_seconds}s"
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run decode_frame -s none -- -max_total_time="$fuzz_seconds" -rss_limit_mb=512)
  fi
else
  step "fuzz run skipped (cargo-fuzz not installed; FUZZ_SECONDS=30 scripts/test.sh installs and runs it)"
fi

step "all tests passed"
