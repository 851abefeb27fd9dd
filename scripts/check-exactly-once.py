#!/usr/bin/env python3
"""Prove that the benchmark job's committed output holds every sequence number exactly once.

Reads the FileSink directory written by demeter-bench (--sink file --output DIR). Only committed
part files count: names starting with '.' (in-progress and pending files) are ignored. Each line
is `windowEnd|key|count|minTs|maxTs|firedAt|step|first-last,first-last...`, a run meaning
first, first+step, ..., last (step = number of keys, key = seq % step).

Sequence numbers are DataGeneratorSource indices: split i of S (S = the first run's source
parallelism) emits a contiguous range from its start. The job's windows close on event time and
a key's windows close in order, so for every (split, key) the committed numbers must form a
gapless run from the key's first number in the split: a gap is a lost record, an overlap a
duplicate. The newest numbers of a key may still sit in open windows (in the last savepoint's
state); they are not in the output yet and are not counted as missing.

Prints a JSON summary on stdout; exit 0 when nothing is missing or duplicated, 1 when something
is, 2 when the output cannot be checked (no committed file, malformed line).
"""

import argparse
import json
import os
import sys
from collections import defaultdict

LONG_MAX = 2**63 - 1
# Splits of an unbounded generator are ~2^63/S apart; records of one split never come close.
SPLIT_GAP = 2**40
EXAMPLES = 10


def committed_files(root):
    committed, ignored = [], 0
    for directory, _, names in os.walk(root):
        for name in sorted(names):
            if name.startswith("."):
                ignored += 1
            else:
                committed.append(os.path.join(directory, name))
    return sorted(committed), ignored


def parse(files):
    """Returns ({(key, step): [(first, last), ...]}, lines, records, problems)."""
    runs = defaultdict(list)
    lines = records = 0
    problems = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.strip()
                if not line:
                    continue
                lines += 1
                try:
                    fields = line.split("|")
                    key, count, step = int(fields[1]), int(fields[2]), int(fields[6])
                    pairs = [tuple(int(x) for x in run.split("-")) for run in fields[7].split(",")]
                except (IndexError, ValueError):
                    problems.append(f"{path}:{number}: malformed line")
                    continue
                in_runs = 0
                for first, last in pairs:
                    if first % step != key or last % step != key or last < first:
                        problems.append(f"{path}:{number}: run {first}-{last} not of key {key} step {step}")
                    in_runs += (last - first) // step + 1
                    runs[(key, step)].append((first, last))
                if in_runs != count:
                    problems.append(f"{path}:{number}: count {count} but runs hold {in_runs}")
                records += count
    return runs, lines, records, problems


def split_starts(splits):
    """Start of each split as NumberSequenceIterator.split cuts [0, Long.MAX_VALUE - 1]."""
    per, extra = divmod(LONG_MAX, splits)
    starts, current = [], 0
    for index in range(splits):
        starts.append(current)
        current += per + (1 if index < extra else 0)
    return starts


def cluster_starts(runs):
    """Lowest number seen in each split, splits told apart by the huge gaps between them."""
    firsts = sorted({first for pairs in runs.values() for first, _ in pairs})
    starts = []
    for value in firsts:
        if not starts or value - previous > SPLIT_GAP:
            starts.append(value)
        previous = value
    return starts


def first_at_or_after(start, key, step):
    return start + (key - start) % step


def check(runs, starts):
    missing = duplicates = distinct = 0
    missing_examples, duplicate_examples = [], []
    per_split = defaultdict(lambda: {"records": 0, "max": None, "keys": 0})

    def split_of(value):
        index = max(i for i, s in enumerate(starts) if s <= value)
        return index

    for (key, step), pairs in runs.items():
        by_split = defaultdict(list)
        for first, last in pairs:
            by_split[split_of(first)].append((first, last))
        for index, split_runs in by_split.items():
            split_runs.sort()
            summary = per_split[index]
            summary["keys"] += 1
            expected = first_at_or_after(starts[index], key, step)
            for first, last in split_runs:
                if first > expected:
                    gap = (first - expected) // step
                    missing += gap
                    if len(missing_examples) < EXAMPLES:
                        missing_examples.append({"key": key, "from": expected, "to": first - step, "count": gap})
                elif first < expected:
                    overlap = (min(last, expected - step) - first) // step + 1
                    duplicates += overlap
                    if len(duplicate_examples) < EXAMPLES:
                        duplicate_examples.append({"key": key, "from": first, "count": overlap})
                new_from = max(first, expected)
                if last >= new_from:
                    count = (last - new_from) // step + 1
                    distinct += count
                    summary["records"] += count
                expected = max(expected, last + step)
            top = expected - step
            summary["max"] = top if summary["max"] is None else max(summary["max"], top)
    splits = [
        {"index": i, "start": starts[i], **per_split[i]} for i in range(len(starts)) if i in per_split
    ]
    return missing, duplicates, distinct, splits, missing_examples, duplicate_examples


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="the job's --output directory")
    parser.add_argument(
        "--splits", type=int,
        help="the first run's source parallelism: checks each split starts where the generator "
        "starts it (default: splits are inferred from the data and their lowest number trusted)",
    )
    parser.add_argument("--min-records", type=int, default=1, help="fail unless at least this many distinct records are committed (default 1)")
    args = parser.parse_args()

    files, ignored = committed_files(args.output)
    runs, lines, records, problems = parse(files)
    summary = {"output": args.output, "committed_files": len(files), "ignored_files": ignored,
               "lines": lines, "records": records}
    if not files or problems:
        summary.update(ok=False, problems=problems[:EXAMPLES] or ["no committed part file"])
        print(json.dumps(summary, indent=2))
        return 2

    seen_starts = cluster_starts(runs)
    if args.splits:
        starts = split_starts(args.splits)
        strays = [s for s in seen_starts if s not in starts]
    else:
        starts, strays = seen_starts, []
    missing, duplicates, distinct, splits, missing_examples, duplicate_examples = check(runs, starts)
    ok = missing == 0 and duplicates == 0 and not strays and distinct >= args.min_records
    summary.update(ok=ok, distinct=distinct, missing=missing, duplicates=duplicates,
                   splits=splits, missing_examples=missing_examples,
                   duplicate_examples=duplicate_examples)
    if strays:
        summary["split_starts_not_expected"] = strays
    if distinct < args.min_records:
        summary["problems"] = [f"only {distinct} distinct records, fewer than --min-records {args.min_records}"]
    print(json.dumps(summary, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
