"""The scalar kernel's SM reads from where and when its blocks ran: replays a block log (SM,
start and end of every block, recorded on the H200 by a build of the scalar kernel with a
block log: the branch `decode-l2-prefetch`, bench/gpu/block_log.py there) through an LRU L1
per SM, and sets the bytes it predicts beside those Nsight Compute measured on the same
calls (l1tex__m_xbar2l1tex_read_bytes).

Block b runs on its logged SM and loads K_j and V_j (Bc = 32 keys, 8 KiB each at d = 128) at
start_b + j (end_b - start_b) / Tc, an even pace; a tile its SM's L1 holds (whole tiles, LRU,
--l1-kib, the 28 KiB the scalar kernel's carve-out leaves) does not cross into the SM. Q
crosses once a block. The grid model (simulator/include/flashlab/sim/grid.hpp, "The L1")
places blocks itself instead: slot k on SM k mod 132, blocks in step.

  python3 bench/gpu/block_log_l1.py bench/results/2026-12-03-h200-scalar-block-log-ncu.csv.gz \
      bench/results/2026-12-03-h200-scalar-block-log-ncu-bytes.csv
"""
import argparse
import collections
import csv
import gzip
import heapq

D, BR, BC, ELEM = 128, 64, 32, 2  # scalar::kBr, kBc at d = 128, bf16
TILE = BC * D * ELEM              # K_j or V_j
Q_BYTES = BR * D * ELEM           # a block's Q tile
METRIC = "l1tex__m_xbar2l1tex_read_bytes.sum"


def load_log(path):
    """(N, call) -> [(block, head, tile, sm, start_ns, end_ns)] in block order."""
    runs = collections.defaultdict(list)
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            runs[(int(r["N"]), int(r["call"]))].append(
                (int(r["block"]), int(r["head"]), int(r["tile"]), int(r["sm"]),
                 int(r["start_ns"]), int(r["end_ns"])))
    return {key: sorted(blocks) for key, blocks in runs.items()}


def load_bytes(path, keys):
    """The measured bytes of each logged call: the profiled launches in order are, for each
    N, a warm-up (not logged) and then the logged calls."""
    launches = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["metric"] == METRIC:
                launches.append(int(r["value"]))
    calls = collections.Counter(n for n, _ in keys)
    measured, at = {}, 0
    for n in sorted(calls):
        at += 1  # the warm-up
        for call in range(calls[n]):
            measured[(n, call)] = launches[at]
            at += 1
    if at != len(launches):
        raise SystemExit(f"{path}: {len(launches)} launches, the log implies {at}")
    return measured


def replay(blocks, n, l1_bytes):
    """Bytes into the SMs: Q once a block, and every K or V tile its SM's L1 misses."""
    tc = (n + BC - 1) // BC
    capacity = l1_bytes // TILE
    events = [(s, i, 0) for i, (_, _, _, _, s, _) in enumerate(blocks)]
    heapq.heapify(events)
    l1 = collections.defaultdict(collections.OrderedDict)
    crossed = 0
    while events:
        _, i, j = heapq.heappop(events)
        _, head, _, sm, start, end = blocks[i]
        cache = l1[sm]
        for kv in (0, 1):
            key = (head, j, kv)
            if key in cache:
                cache.move_to_end(key)
            else:
                crossed += TILE
                cache[key] = True
                if len(cache) > capacity:
                    cache.popitem(last=False)
        if j + 1 < tc:
            heapq.heappush(events, (start + (j + 1) * (end - start) / tc, i, j + 1))
    return crossed + len(blocks) * Q_BYTES


def sharing(blocks):
    """Blocks that ran on an SM at the same time as another block of their head."""
    by_sm = collections.defaultdict(list)
    for b in blocks:
        by_sm[b[3]].append(b)
    return sum(1 for bs in by_sm.values() for a in bs
               if any(o is not a and o[1] == a[1] and o[4] < a[5] and a[4] < o[5] for o in bs))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the block log, CSV (gzip)")
    ap.add_argument("bytes", help="Nsight Compute's bytes of the same calls, CSV")
    ap.add_argument("--l1-kib", type=int, default=28, help="the L1 beside the carve-out")
    args = ap.parse_args()
    runs = load_log(args.log)
    measured = load_bytes(args.bytes, runs.keys())
    print("N, call, blocks sharing an SM with their head, replayed GB (no L1), measured GB, "
          "measured / replayed (no L1)")
    for (n, call), blocks in sorted(runs.items()):
        pred, bare = replay(blocks, n, args.l1_kib * 1024), replay(blocks, n, 0)
        m = measured[(n, call)]
        print(f"{n:6d} {call} {sharing(blocks):5d} {pred / 1e9:8.3f} ({bare / 1e9:.3f}) "
              f"{m / 1e9:8.3f} {m / pred:.3f} ({m / bare:.3f})", flush=True)


if __name__ == "__main__":
    main()
