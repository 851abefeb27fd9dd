#!/usr/bin/env python3
"""Runs the workspace's test binaries (built by `cargo test --no-run`) in lanes.

Why not plain `cargo test`: it runs one test binary after the other, the fast ones included.
Here the fast binaries (unit, property, QUIC end-to-end, the agent's and the REST client's
shorter real-Flink tests: ~4 minutes) and then the daemon test run beside the executor test;
the profiling and tuning tests follow, one at a time. The executor and daemon tests check what
Flink ends up running, not how fast, and alone they left the 2 cores 50-70 % idle (waiting on
savepoints, restarts and heartbeats). The profiling and tuning tests measure the jobs they run
and must not share the machine: beside each other they starved those jobs — a profiling copy
fed 400 records/s processed 85, and a production job that misses its QoS for want of CPU is,
rightly, never profiled or scaled down. Every real-Flink test has its own ports (see
scripts/test.sh), so lanes cannot collide.

    scripts/test-lanes.py ARTIFACTS.json LOG_DIR

ARTIFACTS.json is `cargo test --workspace --no-run --message-format=json`'s output. Each binary
runs from its package's directory (as cargo runs it) with `--nocapture`; its output goes to
LOG_DIR/<name>.log; when it ends, its libtest report (`running N tests`, one line per test,
`test result: ...`) is printed the way `cargo test` prints it, so CI and people reading the
output see every test that ran. Exit status 1 if any binary failed, with the failures' panics
printed.
"""

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

# Long real-Flink tests: phases run one after the other; in a phase, each inner list is a lane
# run in order, beside the phase's other lanes. FAST stands for every other test binary.
FAST = "<fast binaries>"
FLINK_PHASES = [
    [["executor_flink"], [FAST, "daemon_flink"]],
    [["profiling_flink"]],
    [["tuning_flink"]],
]

# libtest's own report lines. With --nocapture a test's output can land between
# "test NAME ... " and its verdict, so a verdict may come lines later.
SUMMARY_LINE = re.compile(r"^(running \d+ tests?$|test result: )")
TEST_STARTED = re.compile(r"^test (\S+) \.\.\. ?(.*)$")
VERDICT = re.compile(r"\b(ok|FAILED|ignored)$")
PRINT_LOCK = threading.Lock()


def libtest_report(text):
    """The lines `cargo test` would have shown for one binary, from its --nocapture log."""
    lines, pending = [], None
    for line in text.splitlines():
        started = TEST_STARTED.match(line)
        verdict = VERDICT.search((started.group(2) if started else line).strip())
        if started:
            pending = started.group(1)
        if pending and verdict:
            lines.append(f"test {pending} ... {verdict.group(1)}")
            pending = None
        elif SUMMARY_LINE.match(line):
            lines.append(line)
    return lines


def test_binaries(artifacts: Path):
    """(name, package dir, executable) of every test harness binary, in build order."""
    seen = set()
    for line in artifacts.read_text().splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        exe = message["executable"]
        if exe in seen:
            continue
        seen.add(exe)
        yield message["target"]["name"], str(Path(message["manifest_path"]).parent), exe


class Lane(threading.Thread):
    def __init__(self, name, binaries, log_dir, started):
        super().__init__(name=name)
        self.binaries = binaries
        self.log_dir = log_dir
        self.started = started
        self.results = []

    def run(self):
        for name, cwd, exe in self.binaries:
            log = self.log_dir / f"{name}.log"
            begin = time.monotonic()
            print(f"[{begin - self.started:6.0f}s] {self.name}: {name} started", flush=True)
            with log.open("w") as out:
                status = subprocess.call([exe, "--nocapture"], cwd=cwd, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            seconds = time.monotonic() - begin
            report = libtest_report(log.read_text(errors="replace"))
            with PRINT_LOCK:
                print(f"[{time.monotonic() - self.started:6.0f}s] {self.name}: {name} "
                      f"{'ok' if status == 0 else 'FAILED'} in {seconds:.0f}s", flush=True)
                print(f"     Running {name} ({exe})")
                print("\n".join(report) + "\n", flush=True)
            self.results.append((name, status, seconds, log))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    artifacts, log_dir = Path(sys.argv[1]), Path(sys.argv[2])
    log_dir.mkdir(parents=True, exist_ok=True)
    binaries = list(test_binaries(artifacts))
    by_name = {b[0]: b for b in binaries}
    flink_names = {n for phase in FLINK_PHASES for lane in phase for n in lane} - {FAST}
    missing = sorted(flink_names - by_name.keys())
    fast = [b for b in binaries if b[0] not in flink_names]
    if missing:
        sys.exit(f"test binaries not built: {', '.join(missing)}")
    started = time.monotonic()
    lanes = []
    for number, phase in enumerate(FLINK_PHASES):
        running = [Lane(f"phase{number + 1}.lane{i + 1}",
                        [b for n in names for b in (fast if n == FAST else [by_name[n]])],
                        log_dir, started)
                   for i, names in enumerate(phase)]
        for lane in running:
            lane.start()
        for lane in running:
            lane.join()
        lanes.extend(running)
    failed = [r for lane in lanes for r in lane.results if r[1] != 0]
    print(f"\n{sum(len(l.results) for l in lanes)} test binaries in "
          f"{time.monotonic() - started:.0f}s; failed: {len(failed)}")
    for name, status, _, log in failed:
        lines = log.read_text(errors="replace").splitlines()
        start = next((i for i, l in enumerate(lines) if "panicked" in l), max(0, len(lines) - 60))
        print(f"\n--- {name} (exit {status}), {log}:")
        print("\n".join(lines[max(0, start - 5):start + 60]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
