#!/usr/bin/env python3
"""Replay the four policies on rate traces Demeter was not developed on.

The benchmark traces (CARS, ADS) are what the policy was tuned against; a user's job is not.
This writes seeded synthetic traces beside variations of the two shipped ones -- a flat rate,
a permanent step, a 4-hour season (the shipped ones have 6), a bounded random walk, CARS
reversed in time, CARS 10 % above its peak, ADS at half its rate -- runs
`demeter-coordinator simulate --policy all --json` on each and prints one markdown table:
cost of each policy (relative to static, profiling included), Demeter's seconds over the
latency QoS, changes and longest recovery, and Demeter's cost against reactive's and the
oracle's.

Figures are for one twin and one seed; `--seed` and `--twin` change them.
"""

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
T0 = 1_639_926_776  # the shipped traces' first timestamp; only differences matter


def read_trace(path):
    rates = []
    with open(path) as f:
        next(f)  # header: timestamp|value
        for line in f:
            line = line.strip()
            if line:
                rates.append(float(line.split("|")[1]))
    return rates


def noisy(rng, level, sigma=0.05):
    return level * (1.0 + sigma * rng.gauss(0.0, 1.0))


def synthetic(name, rng, cars, ads, seconds):
    """The rate per second of trace `name`: `seconds` long, the step at a third of it."""
    if name == "flat":
        return [noisy(rng, 20_000) for _ in range(seconds)]
    if name == "step":
        return [noisy(rng, 10_000 if t < seconds // 3 else 28_000) for t in range(seconds)]
    if name == "season-4h":
        period = 4 * 3600
        return [noisy(rng, 18_000 + 14_000 * math.sin(2 * math.pi * t / period)) for t in range(seconds)]
    if name == "walk":
        level, out = 15_000.0, []
        for _ in range(seconds):
            level = min(max(level + rng.gauss(0.0, 40.0), 4_000.0), 38_000.0)
            out.append(noisy(rng, level))
        return out
    if name == "cars-reversed":
        return list(reversed(cars))[:seconds]
    if name == "cars-110":
        return [r * 1.1 for r in cars[:seconds]]
    if name == "ads-half":
        return [r * 0.5 for r in ads[:seconds]]
    raise ValueError(name)


TRACES = ["flat", "step", "season-4h", "walk", "cars-reversed", "cars-110", "ads-half"]
POLICIES = ["static", "reactive", "demeter", "oracle"]


def write_trace(path, rates):
    with open(path, "w") as f:
        f.write("timestamp|value\n")
        for i, r in enumerate(rates):
            f.write(f"{T0 + i}|{max(0, int(r))}\n")


def simulate(binary, trace, twin, seed):
    cmd = [
        str(binary), "simulate", "--trace", str(trace), "--twin", str(twin),
        "--policy", "all", "--failures-every", "45m", "--seed", str(seed), "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"simulate failed on {trace}:\n{out.stderr[-2000:]}")
    return {r["policy"]: r for r in map(json.loads, out.stdout.splitlines()) if r}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=REPO / "target/release/demeter-coordinator",
                    help="demeter-coordinator to run (default: the release build)")
    ap.add_argument("--twin", default=REPO / "coordinator/testdata/twin-benchmark.toml")
    ap.add_argument("--seed", type=int, default=1, help="trace noise and the twin's draws")
    ap.add_argument("--hours", type=float, default=18.0,
                    help="trace length (the shipped traces are 18 h; shorter ones only check the run)")
    ap.add_argument("--traces", default=",".join(TRACES), help="comma-separated subset of: " + ", ".join(TRACES))
    args = ap.parse_args()
    if not Path(args.binary).is_file():
        sys.exit(f"{args.binary} not found: build it with `cargo build --release -p demeter-coordinator`")
    unknown = set(args.traces.split(",")) - set(TRACES)
    if unknown:
        sys.exit(f"unknown traces {sorted(unknown)}; known: {', '.join(TRACES)}")
    cars = read_trace(REPO / "data/traces/CARS_3D_1S_4_sub_35K_max.csv")
    ads = read_trace(REPO / "data/traces/ADS_3D_1S_4_sub_30K_max.csv")
    print("| trace | static | reactive | demeter | oracle | demeter >QoS % | changes | longest recovery s "
          "| demeter ÷ reactive | demeter ÷ oracle |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.traces.split(","):
            rng = random.Random(f"{name}-{args.seed}")
            path = Path(tmp) / f"{name}.csv"
            write_trace(path, synthetic(name, rng, cars, ads, int(args.hours * 3600)))
            print(f"{name}: simulating", file=sys.stderr, flush=True)
            runs = simulate(args.binary, path, args.twin, args.seed)
            d = runs["demeter"]
            costs = " | ".join(f"{runs[p]['cost']:.3f}" for p in POLICIES)
            changes = d["changes"]["in_place"] + d["changes"]["full_restart"]
            longest = max(d["recoveries_s"], default=0.0)
            print(f"| {name} | {costs} | {d['percent_over_latency']:.2f} | {changes} | {longest:.0f} "
                  f"| {d['cost'] / runs['reactive']['cost']:.2f} | {d['cost'] / runs['oracle']['cost']:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
