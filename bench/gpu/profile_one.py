"""One call of one flashlab kernel between cudaProfilerStart/Stop, after a warm-up outside
that range, so that Nsight Compute's full sections (warp states, per-instruction stall
samples) or a chosen metric set can be read for it:

  ncu --profile-from-start off --set full --import-source yes -o fa3 \
      python3 profile_one.py --lib build/gpu/libflashlab.so fa3
  python3 profile_one.py --lib ... backward | decode
  python3 profile_one.py --lib ... decode --batch 8 --length 4096      # another shape
  python3 profile_one.py --lib ... fa2 --heads 1 --n 4096 --d 64 --causal
  python3 profile_one.py --lib ... naive --heads 1 --n 9216   # its three launches
  ncu --cache-control none --profile-from-start off --metrics dram__bytes_read.sum \
      python3 profile_one.py --lib ... decode --length 4096 --dirty-l2 --kv-l2-policy evict-first

--first-read starts the profiled range with a read of its own (ncu_csv.first_read), which takes
the DRAM writes Nsight Compute charges the first profiled kernel of a process; run under
`--replay-mode application` (ncu_csv.REPLAY) and leave its row out.

--dirty-l2 writes 256 MB just before the profiled call, as triton's do_bench does before each
call it times, so that the call meets an L2 full of dirty lines; Nsight Compute keeps them
only with `--cache-control none` (by default it writes the L2 back and empties it first).

Default shapes: the forward and the backward at B = 1, H = 16, N = 8192, d = 128 (bf16, not
causal), the decode at B = 8, 32 query heads over 8 KV heads, L = 32768, d = 128.
"""
import argparse

import flashlab_ctypes as fl
import ncu_csv
import timing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path to libflashlab.so")
    ap.add_argument("what", choices=["naive", "scalar", "fa2", "fa3", "backward", "decode"])
    ap.add_argument("--batch", type=int, help="B (default 1, the decode's 8)")
    ap.add_argument("--heads", type=int, help="query heads (default 16, the decode's 32)")
    ap.add_argument("--n", type=int, default=8192, help="N of the forward and the backward")
    ap.add_argument("--d", type=int, default=128, choices=[64, 128])
    ap.add_argument("--causal", action="store_true", help="forward and backward: top-left mask")
    ap.add_argument("--length", type=int, default=32768, help="the decode's cache length L")
    ap.add_argument("--lse", action="store_true",
                    help="the decode: ask for the LSE too (the combine then stores it)")
    ap.add_argument("--kv-l2-policy", choices=["auto", "normal", "evict-first"], default="auto",
                    help="the decode's kv_l2_policy (decode.h)")
    ap.add_argument("--first-read", action="store_true",
                    help="start the profiled range with a read of more than twice the L2 "
                         "(ncu_csv.first_read), for the sums to leave out")
    ap.add_argument("--dirty-l2", action="store_true",
                    help="fill the L2 with dirty lines (a 256 MB write) before the profiled call")
    args = ap.parse_args()
    if args.first_read and args.dirty_l2:
        ap.error("--first-read reads the dirty lines of --dirty-l2 out of the L2 before the call: "
                 "give one of them")
    import torch
    lib = fl.Flashlab(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(20261201)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    if args.what == "decode":
        B, H, L = args.batch or 8, args.heads or 32, args.length
        q = torch.randn(B, H, 1, args.d, generator=gen, **bf16)
        k, v = (torch.randn(B, 8, L, args.d, generator=gen, **bf16) for _ in range(2))
        o = torch.empty_like(q)
        lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
        policy = {"auto": fl.DECODE_L2_AUTO, "normal": fl.DECODE_L2_EVICT_NORMAL,
                  "evict-first": fl.DECODE_L2_EVICT_FIRST}[args.kv_l2_policy]
        lse = torch.empty(B, H, 1, device="cuda", dtype=torch.float32) if args.lse else None
        params, _workspace = lib.decode_params(q, k, v, o, lens, L, lse=lse,
                                               kv_l2_policy=policy)
        run = lambda: lib.decode(params)
    else:
        shape = (args.batch or 1, args.heads or 16, args.n, args.d)
        q, k, v, do = (torch.randn(*shape, generator=gen, **bf16) for _ in range(4))
        o = torch.empty_like(q)
        lse = torch.empty(*shape[:3], device="cuda", dtype=torch.float32)
        mask = fl.CAUSAL_TOP_LEFT if args.causal else fl.CAUSAL_NONE
        kernel = fl.KERNELS.get(args.what, fl.FA2)  # the backward's forward: fa2
        forward = lib.params(q, k, v, o, lse, causal=mask, kernel=kernel)
        run = lambda: lib.forward(forward)
        if args.what == "backward":
            run()
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            p = lib.backward_params(q, k, v, o, lse, do, dq, dk, dv, causal=mask)
            workspace = lib.backward(p)
            run = lambda: lib.backward(p, workspace)
    run()
    if args.dirty_l2:
        timing.CleanFlush(torch).flush(clean=False)
    ncu_csv.profile_call(torch, run, first_read_too=args.first_read)


if __name__ == "__main__":
    main()
