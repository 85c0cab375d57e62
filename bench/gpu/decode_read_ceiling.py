"""The decode's ceiling: how fast a kernel that only reads gets through the bytes of K and V
that one decode step reads, timed as bench.py times the decode. A decode step of one query
row is a stream of K and V with little arithmetic, so a kernel that only reads them shows what
the timing leaves a decode to reach: the launch, the ramp of the first loads, and under
do_bench the write-back of the flush's dirty lines are in its time as in the decode's.

At each point (B sequences of L keys; bf16, d = 128, 8 KV heads: bench_decode.py's shape)
four calls are timed in turns, under do_bench (which writes 256 MB before every call and
leaves the L2 full of dirty lines) and after a clean flush (timing.CleanFlush):
  flashlab   the library's decode (its automatic split count and L2 policy);
  cudnn      torch's SDPA decode on its cuDNN backend;
  read       a streaming read of K and V (a Triton kernel: each program XORs 128 KiB of
             them, 16 bytes a lane a load, into one word, so every byte is loaded once,
             and writes 4 bytes); K and V lie in one allocation, K's bytes then V's, for
             every call;
  read-ef    the same read with Triton's evict_first eviction policy on its loads.
TB/s = bytes of K and V / time, for all four. Where even the read stays below a goal under
do_bench, the goal asks more of the decode than a kernel that only reads gets.

  python3 bench/gpu/decode_read_ceiling.py build/gpu/libflashlab.so [--points 8:4096 ...]
      [--csv out.csv]
"""
import argparse
import csv
import functools
import operator
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402
import flashlab_ctypes as fl  # noqa: E402
import timing  # noqa: E402

POINTS = [(8, 1024), (8, 2048), (8, 4096), (8, 8192), (8, 32768), (8, 131072)]
READ_BLOCK = 1024  # int32 words a program loads a step: 4 KiB, two 16-byte loads a lane of 4 warps
READ_WORDS_PER_PROGRAM = 32 * READ_BLOCK   # 128 KiB a program
# The reads timed beside the two decodes: name, evict-first loads. (A read cut into the split
# grid's blocks was timed too, and dropped: bench/gpu/NOTES.md, "The decode's fixed cost, part
# by part".)
READS = (("read", False), ("read-ef", True))
CALLS = ["flashlab", "cudnn"] + [name for name, _ in READS]  # the table's columns, in order

try:
    import triton
    import triton.language as tl
except ImportError:  # a machine without a GPU stack: the module imports, main() needs one
    triton = None

if triton is not None:
    @triton.jit
    def read_all(x_ptr, out_ptr, words, BLOCK: tl.constexpr, PER_PROGRAM: tl.constexpr,
                 EVICT_FIRST: tl.constexpr):
        """Program p XORs words p * PER_PROGRAM .. (p + 1) * PER_PROGRAM - 1 of x into one."""
        start = tl.program_id(0).to(tl.int64) * PER_PROGRAM
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in range(0, PER_PROGRAM, BLOCK):
            offs = start + i + tl.arange(0, BLOCK)
            if EVICT_FIRST:
                acc ^= tl.load(x_ptr + offs, mask=offs < words, other=0,
                               eviction_policy="evict_first")
            else:
                acc ^= tl.load(x_ptr + offs, mask=offs < words, other=0)
        tl.store(out_ptr + tl.program_id(0), tl.xor_sum(acc, 0))


def kv_together(torch, k, v):
    """k and v copied into one allocation, K's bytes then V's: (k, v, the whole), k and v
    contiguous views of it, so that one read covers both."""
    kv = torch.stack((k, v))
    return kv[0], kv[1], kv


def reader(torch, kv, evict_first):
    """A call that reads every byte of kv (contiguous) once, READ_WORDS_PER_PROGRAM words a
    program; its per-program sums."""
    words = kv.numel() * kv.element_size() // 4
    x = kv.view(-1).view(torch.int32)
    per_program = READ_WORDS_PER_PROGRAM
    programs = triton.cdiv(words, per_program)
    out = torch.empty(programs, device="cuda", dtype=torch.int32)

    def run():
        read_all[(programs,)](x, out, words, BLOCK=READ_BLOCK, PER_PROGRAM=per_program,
                              EVICT_FIRST=evict_first)
        return out
    return run, out


def xor_of(out):
    """The XOR of a read's per-program sums: the XOR of every word it loaded, whatever its
    shares."""
    return functools.reduce(operator.xor, out.tolist(), 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lib", help="path to libflashlab.so")
    ap.add_argument("--points", nargs="*", default=[f"{b}:{n}" for b, n in POINTS],
                    help="B:L points (default: B = 8, L = 1024 .. 131072)")
    ap.add_argument("--csv", help="write the rows here as well")
    args = ap.parse_args()
    points = bd.parse_points(ap, args.points)
    import torch
    from triton.testing import do_bench

    lib = fl.Flashlab(args.lib)
    flusher = timing.CleanFlush(torch)
    rows = []
    print("TB/s of K and V (bf16, d = 128, 8 KV heads): do_bench | after a clean flush")
    columns = " ".join(f"{name:>9}" for name in CALLS)
    print(f"{'B':>3} {'L':>7} {'blocks':>6} | {columns} | {columns}")
    for B, L in points:
        q, k, v, o, lse, lens = bd.decode_inputs(torch, B, L)
        k, v, kv = kv_together(torch, k, v)
        params, workspace = lib.decode_params(q, k, v, o, lens, L, lse=lse)
        fns = {"flashlab": lambda: lib.decode(params),
               "cudnn": bd.torch_decode(torch, "cudnn", q, k, v)}
        # The split grid's blocks: splits x B x KV heads, one row block each (a KV head's 4
        # query rows fit the 16 of decode::row_blocks in kernel_info.hpp).
        blocks = lib.decode_num_splits(params) * B * bd.HEADS_KV
        expected = None
        for name, evict_first in READS:
            fn, out = reader(torch, kv, evict_first)
            fn()
            torch.cuda.synchronize()
            # The reads load the same words: the XOR of each one's sums is the same, which
            # shows that every program loaded its share (a load the compiler dropped would not).
            got = xor_of(out)
            if expected is None:
                expected = got
            elif got != expected:
                sys.exit(f"the {name} kernel's words differ from the plain read's")
            fns[name] = fn
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        dirty = timing.interleaved_medians(do_bench, fns)
        clean = timing.interleaved_clean_medians(flusher, fns)
        tbs = lambda ms: bd.kv_bytes(B, L) / (ms * 1e-3) / 1e12  # noqa: E731
        print(f"{B:3d} {L:7d} {blocks:6d} | " + " ".join(f"{tbs(dirty[n]):9.2f}" for n in CALLS) +
              " | " + " ".join(f"{tbs(clean[n]):9.2f}" for n in CALLS), flush=True)
        for n in CALLS:
            rows.append([B, L, n, blocks, f"{dirty[n]:.4f}", f"{tbs(dirty[n]):.3f}",
                         f"{clean[n]:.4f}", f"{tbs(clean[n]):.3f}"])
        del q, k, v, kv, o, lse, workspace, fns
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["B", "L", "impl", "decode_blocks", "ms", "tb_per_s", "ms_clean",
                        "tb_per_s_clean"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
