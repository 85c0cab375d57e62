"""What do_bench's flush costs the decode that follows it, against how long the GPU idles in
between. do_bench writes 256 MB before each call, leaving the L2 full of dirty lines, and the
call starts as soon as the write's kernel ends. Two readings of the ~10 us that a short decode
then pays (bench/gpu/NOTES.md, "Decode at L = 4096"):
  eviction  the decode's reads push the dirty lines out and each costs a write to DRAM:
            waiting before the call changes nothing, the lines stay dirty in the L2;
  drain     the flush's own write-back is still going to DRAM when the call starts:
            the cost falls as the wait grows, to the clean flush's time.
Each call is timed with CUDA events after the dirty flush and a wait of W us (a one-thread
spin kernel, torch.cuda._sleep), and after the clean flush (timing.CleanFlush) with the same
wait, every (implementation, wait) timed in balanced turns. bf16, d = 128, 32 query heads over
8 KV heads, N_q = 1; TB/s of K and V.

  python3 bench/gpu/decode_flush_wait.py build/gpu/libflashlab.so [--points 8:4096 8:32768]
      [--waits 0 5 10 20 50] [--csv out.csv]
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402
import flashlab_ctypes as fl  # noqa: E402
import timing  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lib", help="path to libflashlab.so")
    ap.add_argument("--points", nargs="*", default=["8:4096", "8:32768"], help="B:L pairs")
    ap.add_argument("--waits", type=float, nargs="*", default=[0, 5, 10, 20, 50],
                    help="microseconds of idle GPU between the flush and the call")
    ap.add_argument("--reps", type=int, default=60,
                    help="timed calls per (implementation, flush, wait), shared out over the "
                         "balanced rounds, at least timing.MIN_ROUND_CLEAN_REPS a round")
    ap.add_argument("--csv", help="write one row per (B, L, implementation, flush, wait)")
    args = ap.parse_args()
    points = bd.parse_points(ap, args.points)
    if any(w < 0 for w in args.waits):
        ap.error(f"--waits {args.waits}: a wait is 0 us or more")
    import torch
    lib = fl.Flashlab(args.lib)
    flusher = timing.CleanFlush(torch)
    print(f"spin kernel: {flusher.cycles_per_us():.0f} cycles a microsecond")
    rows = []
    for B, L in points:
        q, k, v, o, lse, lens = bd.decode_inputs(torch, B, L)
        params, workspace = lib.decode_params(q, k, v, o, lens, L, lse=lse)
        impls = {"flashlab": lambda: lib.decode(params),
                 "cudnn": bd.torch_decode(torch, "cudnn", q, k, v)}
        fns = {}
        for name, fn in impls.items():
            for clean in (False, True):
                for wait in args.waits:
                    key = (name, "clean" if clean else "dirty", wait)
                    fns[key] = (fn, clean, wait)
        # timing.interleaved times fns' values with time_round; here a value carries its flush.
        medians = timing.interleaved(
            fns, lambda f, rounds: flusher.median_ms(
                f[0], reps=max(timing.MIN_ROUND_CLEAN_REPS, args.reps // rounds),
                clean=f[1], wait_us=f[2]))
        gb = bd.kv_bytes(B, L)
        print(f"B = {B}, L = {L}: us (TB/s)")
        print("  impl      flush  " + "  ".join(f"wait {w:>4g}" + " " * 7 for w in args.waits))
        for name in impls:
            for flush in ("dirty", "clean"):
                cells = []
                for w in args.waits:
                    ms = medians[(name, flush, w)]
                    cells.append(f"{ms * 1e3:7.1f} ({gb / (ms * 1e-3) / 1e12:4.2f})")
                    rows.append([B, L, name, flush, w, f"{ms * 1e3:.2f}",
                                 f"{gb / (ms * 1e-3) / 1e12:.3f}"])
                print(f"  {name:9s} {flush:5s}  " + "  ".join(cells), flush=True)
        del workspace
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["B", "L", "impl", "flush", "wait_us", "us", "tb_per_s"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
