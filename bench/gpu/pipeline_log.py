"""fa3's pipeline log read as a work item's phases: where an item's time goes beyond its tiles.

bench_pipeline_log (bench/gpu/pipeline_log.cu) writes, for each logged block, every step of the
producer warp and of each consumer warpgroup. This script takes each consumer's work items
apart, from the moment it has an item to the moment it has the next:

  start      item -> scores_issued(0)            Q, K_0 and (ping-pong) the turn awaited
  s0         scores_issued(0) -> scores_landed(0)  S_0's latency, nothing else to do
  softmax0   scores_landed(0) -> softmax_done(0)   S_0's softmax, U += W V not yet begun
  mainloop   softmax_done(0) -> softmax_done(T-1)  T - 1 sections, each U += W V and S_j
  last_wait  softmax_done(T-1) -> values_issued    V_{T-1} and the turn awaited
  last_pv    values_issued -> values_landed(T-1)   the last U += W V's latency
  o          values_landed(T-1) -> o_written       O = U / l, LSE, the TMA store issued
  next       o_written -> the next item            the next item's slot awaited

and sets them beside the section time of the mainloop's middle (the median of its sections
but the first and last two), so that an item's fixed cost reads in sections: the item's whole
time less T sections. Items with fewer than 5 KV tiles give no middle and take the median
section of the longer items of the same log.

  python3 bench/gpu/pipeline_log.py LOG.csv [LOG2.csv ...] [--csv phases.csv]
"""
import argparse
import collections
import csv
import os
import statistics
import sys

PHASES = ["start", "s0", "softmax0", "mainloop", "last_wait", "last_pv", "o", "next"]


class LogError(Exception):
    pass


def read_log(path):
    """Rows of one log, grouped by (block, role), each in time order."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror}")
    need = {"block", "role", "event", "item", "j", "t_ns", "N", "d", "causal", "batch", "heads"}
    if not rows or not need <= set(rows[0]):
        raise LogError(f"{path}: not a bench_pipeline_log CSV (columns {sorted(need)} expected)")
    by_role = collections.defaultdict(list)
    for r in rows:
        by_role[(int(r["block"]), r["role"])].append(
            (float(r["t_ns"]), r["event"], int(r["item"]), int(r["j"])))
    for entries in by_role.values():
        entries.sort(key=lambda e: e[0])
    shape = {k: rows[0][k] for k in ("batch", "heads", "N", "d", "causal")}
    return shape, by_role


def consumer_items(entries):
    """One consumer's items in order: for each, {event name: [(j, t)]} and its start."""
    items, early = [], collections.defaultdict(list)
    for t, event, item, j in entries:
        if event == "item":
            events = collections.defaultdict(list)
            # Events of this item logged before its `item` entry (across items, the last item's
            # end issues this one's S_0 and sees it land) count for it.
            for name, jt in early.pop(item, []):
                events[name].append(jt)
            items.append({"item": item, "tiles": j, "t": t, "events": events})
        elif items and items[-1]["item"] == item:
            items[-1]["events"][event].append((j, t))
        else:
            early[item].append((event, (j, t)))
    return items


def first(events, name, j):
    times = [t for jj, t in events.get(name, []) if jj == j]
    return times[0] if times else None


def item_phases(it, next_start):
    """The phases of one item (None where an event is missing), and its mainloop's sections."""
    e, T = it["events"], it["tiles"]
    marks = {
        "item": it["t"],
        "s0_issued": first(e, "scores_issued", 0),
        "s0_landed": first(e, "scores_landed", 0),
        "sm0": first(e, "softmax_done", 0),
        "sm_last": first(e, "softmax_done", T - 1),
        "pv_issued": first(e, "values_issued", T - 1),
        "pv_landed": first(e, "values_landed", T - 1),
        "o": first(e, "o_written", -1),
        "next": next_start,
    }
    order = ["item", "s0_issued", "s0_landed", "sm0", "sm_last", "pv_issued", "pv_landed", "o",
             "next"]
    phases = {}
    for name, (a, b) in zip(PHASES, zip(order, order[1:])):
        phases[name] = (marks[b] - marks[a]) if marks[a] is not None and marks[b] is not None else None
    done = sorted(t for j, t in e.get("softmax_done", []))
    sections = [b - a for a, b in zip(done, done[1:])]
    middle = sections[2:-2] if len(sections) >= 5 else []
    return phases, middle


def summarise(path):
    shape, by_role = read_log(path)
    per_phase = collections.defaultdict(list)
    spans, tiles, middles = [], [], []
    for (block, role), entries in by_role.items():
        if not role.startswith("consumer"):
            continue
        items = consumer_items(entries)
        for k, it in enumerate(items):
            if it["tiles"] <= 0:
                continue
            nxt = items[k + 1]["t"] if k + 1 < len(items) else None
            phases, middle = item_phases(it, nxt)
            middles += middle
            if nxt is None:
                continue
            spans.append(nxt - it["t"])
            tiles.append(it["tiles"])
            for name, v in phases.items():
                if v is not None:
                    per_phase[name].append(v)
    if not spans:
        raise LogError(f"{path}: no consumer ran two items; log a grid with several items a block")
    if not middles:
        raise LogError(f"{path}: no item has 5 KV tiles or more, so no section time to read the "
                       "items against; log a longer N beside it")
    section = statistics.median(middles)
    med = {name: statistics.median(v) for name, v in per_phase.items()}
    span = statistics.median(spans)
    t = statistics.median(tiles)
    return {"log": os.path.basename(path), **shape, "items": len(spans), "tiles": t, "section_ns": section, "item_ns": span,
            "fixed_ns": span - t * section, "fixed_sections": (span - t * section) / section,
            **{f"{k}_ns": med.get(k) for k in PHASES}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="bench_pipeline_log CSVs")
    ap.add_argument("--csv", help="write the table here too")
    args = ap.parse_args(argv)
    try:
        rows = [summarise(p) for p in args.logs]
    except LogError as e:
        sys.exit(f"pipeline_log: {e}")
    cols = ["log", "batch", "heads", "N", "d", "causal", "items", "tiles", "section_ns", "item_ns",
            "fixed_ns", "fixed_sections"] + [f"{k}_ns" for k in PHASES]
    print("  ".join(cols))
    for r in rows:
        print("  ".join("-" if r[c] is None else (f"{r[c]:.0f}" if isinstance(r[c], float) and
                                                   c != "fixed_sections" else
                                                   f"{r[c]:.2f}" if isinstance(r[c], float) else
                                                   str(r[c])) for c in cols))
    if args.csv:
        try:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
                w.writeheader()
                for r in rows:  # ns to a tenth, sections to 1e-4: what the clock resolves
                    w.writerow({c: (round(v, 4 if c == "fixed_sections" else 1)
                                    if isinstance(v, float) else v) for c, v in r.items()})
        except OSError as e:
            sys.exit(f"pipeline_log: cannot write {args.csv}: {e.strerror}")


if __name__ == "__main__":
    main()
