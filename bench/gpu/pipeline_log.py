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

where O goes through SRAM, o in three (logged since the run of 2026-12-04, sixth):

  o_wait     values_landed(T-1) -> o_ready          sO free, the warpgroup at its barrier
  o_stage    o_ready -> o_staged                    O = U / l into sO, LSE, the proxy fence
  o_store    o_staged -> o_written                  the TMA store issued

and sets them beside the section time of the mainloop's middle (the median of its sections
but the first and last two), so that an item's fixed cost reads in sections: the item's whole
time less T sections. Items with fewer than 5 KV tiles give no middle and take the median
section of the longer items of the same log.

  python3 bench/gpu/pipeline_log.py LOG.csv [LOG2.csv ...] [--csv phases.csv]
  python3 bench/gpu/pipeline_log.py LOG.csv --draw 7 --from-ns 40000 --step-ns 100
  python3 bench/gpu/pipeline_log.py LOG.csv --blocks [--csv blocks.csv]

--draw prints one block's roles as a timeline, lesson 8's pictures of the real kernel.
--blocks prints each block's start, end and work (its items, and its consumers' KV tiles, the
sum of their `item` entries' tiles), on the GPU's one clock (the log's block_start_ns column;
0 for logs written before it), and the grid's balance: the mean end over the last, the share
of the call the same work would take if every block ended together. Log every block of the
grid (bench_pipeline_log --blocks 132) for the balance to mean that.
"""
import argparse
import collections
import csv
import os
import statistics
import sys

PHASES = ["start", "s0", "softmax0", "mainloop", "last_wait", "last_pv", "o", "next"]
O_PHASES = ["o_wait", "o_stage", "o_store"]


class LogError(Exception):
    pass


def read_rows(path, need):
    """The rows of one log, as dicts, having at least the columns `need`."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror}")
    if not rows or not need <= set(rows[0]):
        raise LogError(f"{path}: not a bench_pipeline_log CSV (columns {sorted(need)} expected)")
    return rows


def read_log(path):
    """Rows of one log, grouped by (block, role), each in time order."""
    rows = read_rows(path, {"block", "role", "event", "item", "j", "t_ns", "N", "d", "causal",
                            "batch", "heads"})
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
    marks["o_ready"] = first(e, "o_ready", -1)
    marks["o_staged"] = first(e, "o_staged", -1)
    phases = {}
    pairs = list(zip(PHASES, zip(order, order[1:])))
    pairs += list(zip(O_PHASES, [("pv_landed", "o_ready"), ("o_ready", "o_staged"),
                                 ("o_staged", "o")]))
    for name, (a, b) in pairs:
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
            **{f"{k}_ns": med.get(k) for k in PHASES + O_PHASES}}


def block_ends(path):
    """Each logged block's start, end and work, in block order, and the grid's balance."""
    rows = read_rows(path, {"block", "sm", "role", "event", "item", "j", "t_ns"})
    blocks = {}
    for r in rows:
        b = int(r["block"])
        start = float(r.get("block_start_ns") or 0.0)
        blk = blocks.setdefault(b, {"block": b, "sm": int(r["sm"]), "start_ns": start,
                                    "end_ns": None, "items": set(), "consumer_tiles": 0})
        if not r["role"].startswith("consumer"):
            continue
        if r["event"] == "o_written":
            end = start + float(r["t_ns"])
            blk["end_ns"] = end if blk["end_ns"] is None else max(blk["end_ns"], end)
        elif r["event"] == "item":
            blk["items"].add(int(r["item"]))
            blk["consumer_tiles"] += int(r["j"])
    out = [dict(blk, items=len(blk["items"])) for _, blk in sorted(blocks.items())
           if blk["end_ns"] is not None]
    if not out:
        raise LogError(f"{path}: no block wrote an O; log a grid whose blocks run items")
    last = max(b["end_ns"] for b in out)
    balance = statistics.mean(b["end_ns"] for b in out) / last if last > 0 else 1.0
    return out, balance


# What a consumer does between two of its events, drawn one character per step of time:
# S: S_j in flight; E: the softmax of S_j; p: U += W V still in flight after the softmax;
# P: the last U += W V in flight; O: writing O; '.': waiting (data, the turn, the next item).
SPANS = [("scores_issued", "scores_landed", "S", 0), ("scores_landed", "softmax_done", "E", 0),
         ("softmax_done", "values_landed", "p", -1), ("values_issued", "values_landed", "P", 0),
         ("values_landed", "o_written", "O", None)]


def spans(entries):
    """A consumer's intervals (start, end, char): each SPANS pair, matched by item and tile."""
    times = {}
    for t, event, item, j in entries:
        times.setdefault((event, item, j), t)
    out = []
    for (event, item, j), t in times.items():
        for begin, end, char, dj in SPANS:
            if event != begin:
                continue
            if dj is None:  # O: from the item's last product landing to its O
                if ("o_written", item, -1) in times and ("values_issued", item, j) in times:
                    out.append((t, times[("o_written", item, -1)], char))
            elif (end, item, j + dj) in times and not (char == "p" and
                                                     ("values_issued", item, j + dj) in times):
                out.append((t, times[(end, item, j + dj)], char))
    return out


def draw(path, block, start_ns, width, step_ns):
    """One block's roles from start_ns on, `width` characters of `step_ns` each."""
    _, by_role = read_log(path)
    roles = sorted(r for b, r in by_role if b == block)
    if not roles:
        raise LogError(f"{path}: block {block} is not in the log")
    lines = []
    for role in roles:
        row = ["."] * width
        entries = by_role[(block, role)]
        if role == "producer":
            for t, event, item, j in entries:
                k = int((t - start_ns) // step_ns)
                if 0 <= k < width:
                    row[k] = event[0].upper()  # q_issued, k_issued, v_issued: Q, K, V
        else:
            for t0, t1, char in spans(entries):
                for k in range(max(0, int((t0 - start_ns) // step_ns)),
                               min(width, int((t1 - start_ns) // step_ns) + 1)):
                    row[k] = char
        lines.append(f"{role:>10} |{''.join(row)}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="bench_pipeline_log CSVs")
    ap.add_argument("--csv", help="write the table here too")
    ap.add_argument("--draw", type=int, metavar="BLOCK",
                    help="draw this block's roles (one log) instead of the table")
    ap.add_argument("--from-ns", type=float, default=0.0, help="--draw: where to start")
    ap.add_argument("--width", type=int, default=100, help="--draw: characters a line")
    ap.add_argument("--step-ns", type=float, default=100.0, help="--draw: ns a character")
    ap.add_argument("--blocks", action="store_true",
                    help="each block's start, end and work, and the grid's balance (one log)")
    args = ap.parse_args(argv)
    if args.blocks:
        if len(args.logs) != 1 or args.draw is not None:
            sys.exit("pipeline_log: --blocks takes one log, and no --draw")
        try:
            blocks, balance = block_ends(args.logs[0])
        except LogError as e:
            sys.exit(f"pipeline_log: {e}")
        cols = ["block", "sm", "start_ns", "end_ns", "items", "consumer_tiles"]
        print("  ".join(cols))
        for b in blocks:
            print("  ".join(f"{b[c]:.0f}" if isinstance(b[c], float) else str(b[c]) for c in cols))
        ends = sorted(b["end_ns"] for b in blocks)
        print(f"{len(blocks)} blocks; ends {ends[0] / 1e3:.1f} to {ends[-1] / 1e3:.1f} us, "
              f"median {statistics.median(ends) / 1e3:.1f}; mean end over the last {balance:.4f}")
        if args.csv:
            try:
                with open(args.csv, "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
                    w.writeheader()
                    for b in blocks:
                        w.writerow({c: round(b[c], 1) if isinstance(b[c], float) else b[c]
                                    for c in cols})
            except OSError as e:
                sys.exit(f"pipeline_log: cannot write {args.csv}: {e.strerror}")
        return
    if args.draw is not None:
        if len(args.logs) != 1 or args.width < 1 or args.step_ns <= 0:
            sys.exit("pipeline_log: --draw takes one log, a --width of 1 or more and a "
                     "--step-ns above 0")
        try:
            lines = draw(args.logs[0], args.draw, args.from_ns, args.width, args.step_ns)
        except LogError as e:
            sys.exit(f"pipeline_log: {e}")
        print(f"block {args.draw} from {args.from_ns:.0f} ns, one character = {args.step_ns:g} ns;"
              " S: S_j in flight, E: its softmax, p: U += W V still in flight, P: the last"
              " U += W V, O: O written, '.': waiting; producer: Q, K, V copies issued")
        print("\n".join(lines))
        return
    try:
        rows = [summarise(p) for p in args.logs]
    except LogError as e:
        sys.exit(f"pipeline_log: {e}")
    cols = ["log", "batch", "heads", "N", "d", "causal", "items", "tiles", "section_ns", "item_ns",
            "fixed_ns", "fixed_sections"] + [f"{k}_ns" for k in PHASES + O_PHASES]
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
