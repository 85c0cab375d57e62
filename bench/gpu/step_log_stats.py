"""What a step log says about a kernel's blocks beyond their starts and ends: the scalar
kernel's logs from block_log.py --steps (PREFIX.csv, PREFIX-steps.csv; either may be
compressed, .csv.xz), one logged call at a time. Two tables:

  The front. Every step of every block (but its first and its last two), by how long after
  the first block of its KV head began that same step (so read that K_j and V_j first) it
  began, and the median time the step took. A step begun while the head's first read of the
  tile is still in flight waits for it as the first reader does.

  Blocks of one head on one SM. For each pair of blocks of one KV head resident on one SM
  at once, where the other block stood (its step and the fraction of it done) each time
  this one began a step: the share of those moments with the two within a quarter of a step
  of each other (in step), behind or ahead by more, as logged and as an even pace (each
  block's steps spread evenly over its start and end: what a log of starts and ends alone
  gives the grid model's replay). Blocks in step read each tile into the SM's L1 once.

  python3 bench/gpu/step_log_stats.py \\
      --log bench/results/h100/2026-12-05-h100-scalar-step-log/scalar-block-log.csv \\
      --n 4096 --causal 1

docs/IO-LEVELS.md ("The scalar kernel's heads catch up") and bench/gpu/NOTES.md say what the
stored logs show.
"""
import argparse
import bisect
import collections
import csv
import io
import lzma
import os
import statistics
import sys

# Edges (us) of the front table's rows: time since the head's first reader began the step.
FRONT_EDGES_US = (0, 2, 4, 8, 12, 16, 32, 64)
# Two blocks closer than this (in steps) stand in step.
IN_STEP = 0.25


def open_csv(path):
    """The rows of a CSV file, or of PATH.xz where PATH is absent."""
    for candidate in (path, path + ".xz"):
        if os.path.exists(candidate):
            if candidate.endswith(".xz"):
                return list(csv.DictReader(io.TextIOWrapper(lzma.open(candidate), "utf-8")))
            with open(candidate, newline="") as f:
                return list(csv.DictReader(f))
    raise SystemExit(f"step_log_stats: no {path} (nor {path}.xz): give the block log that "
                     "block_log.py --steps wrote, its step log beside it")


def load(log_path, n, causal, call):
    """The call's blocks {block: (kv head, sm, start, end)} and steps {block: [start of step
    0, 1, ...]}."""
    steps_path = log_path[:-len(".csv")] + "-steps.csv"
    picked = lambda r: (int(r["N"]) == n and int(r["causal"]) == causal
                        and int(r["call"]) == call)
    blocks = {int(r["block"]): (int(r["head"]), int(r["sm"]), int(r["start_ns"]),
                                int(r["end_ns"]))
              for r in open_csv(log_path) if picked(r)}
    if not blocks:
        raise SystemExit(f"step_log_stats: {log_path} has no call {call} at N = {n} with "
                         f"causal = {causal}: give a shape and call the log holds")
    steps = collections.defaultdict(list)
    for r in open_csv(steps_path):
        if picked(r):
            steps[int(r["block"])].append((int(r["step"]), int(r["start_ns"])))
    if not steps:
        raise SystemExit(f"step_log_stats: {steps_path} has no steps for that call: log it "
                         "with block_log.py --steps")
    missing = sorted(set(blocks) - set(steps))
    if missing:
        raise SystemExit(f"step_log_stats: block {missing[0]} has no steps in {steps_path} "
                         f"({len(missing)} blocks in all): give the step log of the same run")
    return blocks, {b: [t for _, t in sorted(s)] for b, s in steps.items()}


def front(blocks, steps):
    """[(lo_us, hi_us, steps, median step time in us)] by time since the head's first
    reader began the same step; hi None for the last row."""
    first = {}
    for b, ts in steps.items():
        for j, t in enumerate(ts):
            key = (blocks[b][0], j)
            first[key] = min(first.get(key, t), t)
    rows = collections.defaultdict(list)
    for b, ts in steps.items():
        ends = ts[1:] + [blocks[b][3]]
        for j in range(1, len(ts) - 2):
            since_us = (ts[j] - first[(blocks[b][0], j)]) / 1000
            row = bisect.bisect_right(FRONT_EDGES_US, since_us) - 1
            rows[row].append((ends[j] - ts[j]) / 1000)
    return [(FRONT_EDGES_US[i], FRONT_EDGES_US[i + 1] if i + 1 < len(FRONT_EDGES_US) else None,
             len(rows[i]), statistics.median(rows[i])) for i in sorted(rows)]


def position(starts, end, t):
    """Where a block whose steps began at `starts` and which ended at `end` stood at time t:
    step index plus the fraction of it done, or None outside its steps."""
    if t < starts[0] or t > end:
        return None
    k = bisect.bisect_right(starts, t) - 1
    nxt = starts[k + 1] if k + 1 < len(starts) else end
    return k + (t - starts[k]) / max(1, nxt - starts[k])


def pairs(blocks, steps):
    """(moments, share in step, share behind, share ahead by more than IN_STEP) over every
    step start of every block with another block of its KV head on its SM at the time."""
    by_sm = collections.defaultdict(list)
    for b, (_, sm, _, _) in blocks.items():
        by_sm[sm].append(b)
    count = collections.Counter()
    for bl in by_sm.values():
        for a in bl:
            for other in bl:
                if other == a or blocks[other][0] != blocks[a][0]:
                    continue
                for j, t in enumerate(steps[a]):
                    where = position(steps[other], blocks[other][3], t)
                    if where is None:
                        continue
                    lag = where - j
                    count["in step" if abs(lag) < IN_STEP else
                          "ahead" if lag > 0 else "behind"] += 1
    total = sum(count.values())
    if total == 0:
        return 0, 0.0, 0.0, 0.0
    return total, count["in step"] / total, count["behind"] / total, count["ahead"] / total


def even_pace(blocks, steps):
    """Each block's steps spread evenly over its logged start and end."""
    return {b: [blocks[b][2] + j * (blocks[b][3] - blocks[b][2]) / len(ts)
                for j in range(len(ts))] for b, ts in steps.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", required=True, help="the block log (PREFIX.csv); its step log "
                    "PREFIX-steps.csv (or .csv.xz) beside it")
    ap.add_argument("--n", type=int, required=True, help="the logged N")
    ap.add_argument("--causal", type=int, choices=(0, 1), default=0)
    ap.add_argument("--call", type=int, default=0, help="which logged call (default 0)")
    args = ap.parse_args(argv)
    blocks, steps = load(args.log, args.n, args.causal, args.call)
    print(f"{len(blocks)} blocks, {sum(len(s) for s in steps.values())} steps "
          f"(N = {args.n}, causal = {args.causal}, call {args.call})\n")
    print("| since the head's first reader began the step (us) | steps | median step (us) |")
    print("|---|---|---|")
    for lo, hi, count, median in front(blocks, steps):
        span = f"{lo} to {hi}" if hi is not None else f"{lo} and more"
        print(f"| {span} | {count} | {median:.1f} |")
    print("\n| blocks of one head on one SM | moments | in step | behind | ahead |")
    print("|---|---|---|---|---|")
    for label, timing in (("as logged", steps), ("an even pace", even_pace(blocks, steps))):
        total, in_step, behind, ahead = pairs(blocks, timing)
        print(f"| {label} | {total} | {in_step:.3f} | {behind:.3f} | {ahead:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
