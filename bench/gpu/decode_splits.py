"""The decode's split count against time, beside cuDNN's decode: every count of SPLITS forced
through flashlab_decode's num_splits at the goal's shapes (bf16, d = 128, 32 query heads over 8
KV heads, N_q = 1, B = 8 or --batches), the automatic choice printed beside them. TB/s of K
and V read, by triton's do_bench, all counts and cuDNN timed in balanced turns
(timing.interleaved_medians), then again after a clean flush (after "clean":
timing.interleaved_clean_medians).
With --other-lib NAME=PATH (repeatable) each other build of the library joins the turns at
its automatic count, as NAME: two builds of the decode compared in one run. --splits sets the
forced counts (none: only the automatic one, `auto`). --queue-pieces times the queue grid
(persistent blocks, decode.h's FLASHLAB_DECODE_GRID_QUEUE) at each piece count given, as qP
(0: its automatic count, as `qauto`), and each other build's queue likewise, as NAME-qP.

  python3 bench/gpu/decode_splits.py --lib build/gpu/libflashlab.so [--lengths 4096 131072]
      [--splits 2 4] [--other-lib variant=/path/to/libflashlab.so]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402
import flashlab_ctypes as fl  # noqa: E402
import timing  # noqa: E402

SPLITS = [2, 3, 4, 5, 6, 8, 12, 16]
BATCH = 8


def tb_per_s(B, L, times):
    """Each implementation's TB/s of K and V from its median ms, as `name:TB/s` words."""
    return " ".join(f"{n}:{bd.kv_bytes(B, L) / (ms * 1e-3) / 1e12:.2f}" for n, ms in times.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libflashlab.so")
    ap.add_argument("--lengths", type=int, nargs="*", default=[131072, 32768, 4096])
    ap.add_argument("--batches", type=int, nargs="*", default=[BATCH],
                    help="B, the sequences (default 8, the goal's); every length at each")
    ap.add_argument("--splits", type=int, nargs="*", default=SPLITS,
                    help="the forced split counts (none: the automatic count alone)")
    ap.add_argument("--other-lib", action="append", default=[], metavar="NAME=PATH",
                    help="another build, timed at its automatic count as NAME")
    ap.add_argument("--queue-pieces", type=int, nargs="*", default=[],
                    help="the queue grid's piece counts to time (0: its automatic count)")
    args = ap.parse_args()
    others = {}
    for item in args.other_lib:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            ap.error(f"--other-lib {item!r}: give NAME=PATH, e.g. variant=/tmp/v/libflashlab.so")
        if not os.path.isfile(path):
            ap.error(f"--other-lib {item!r}: no file at {path}")
        others[name] = path
    import torch
    from triton.testing import do_bench
    lib = fl.Flashlab(args.lib)
    flusher = timing.CleanFlush(torch)
    other_libs = {name: fl.Flashlab(path) for name, path in others.items()}
    print(f"TB/s of K and V by split count (bf16, d = {bd.D}, "
          f"{bd.HEADS_Q} / {bd.HEADS_KV} heads, N_q = 1)")
    for B, L in ((B, L) for B in args.batches for L in args.lengths):
        q, k, v, o, lse, lens = bd.decode_inputs(torch, B, L)
        fns, kept = {"cudnn": bd.torch_decode(torch, "cudnn", q, k, v)}, []
        auto_params = lib.decode_params(q, k, v, o, lens, L, lse=lse)
        auto = lib.decode_num_splits(auto_params[0])
        kept.append(auto_params)
        fns["auto"] = (lambda p=auto_params[0]: lib.decode(p))
        for name, other in other_libs.items():
            params = other.decode_params(q, k, v, o, lens, L, lse=lse)
            kept.append(params)
            fns[name] = (lambda p=params[0], other=other: other.decode(p))
        for s in args.splits:
            params, workspace = lib.decode_params(q, k, v, o, lens, L, lse=lse, num_splits=s)
            kept.append((params, workspace))  # alive until timed
            fns[f"s{s}"] = (lambda p=params: lib.decode(p))
        for pieces in args.queue_pieces:
            for name, one in [("", lib)] + [(name + "-", other) for name, other in
                                            other_libs.items()]:
                params, workspace = one.decode_params(q, k, v, o, lens, L, lse=lse,
                                                      num_splits=pieces, grid=fl.DECODE_GRID_QUEUE)
                kept.append((params, workspace))
                fns[f"{name}q{pieces or 'auto'}"] = (lambda p=params, one=one: one.decode(p))
        times = timing.interleaved_medians(do_bench, fns)
        clean = timing.interleaved_clean_medians(flusher, fns)
        print(B, L, "auto", auto, tb_per_s(B, L, times), "| clean", tb_per_s(B, L, clean),
              flush=True)


if __name__ == "__main__":
    main()
