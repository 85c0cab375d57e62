"""One call of one flashlab kernel between cudaProfilerStart/Stop, after a warm-up outside
that range, so that Nsight Compute's full sections (warp states, per-instruction stall
samples) can be read for it:

  ncu --profile-from-start off --set full --import-source yes -o fa3 \
      python3 profile_one.py --lib build/gpu/libflashlab.so fa3
  python3 profile_one.py --lib ... backward | decode

Shapes: the forward and the backward at B = 1, H = 16, N = 8192, d = 128 (bf16, not
causal), the decode at B = 8, 32 query heads over 8 KV heads, L = 32768, d = 128.
"""
import argparse

import flashlab_ctypes as fl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path to libflashlab.so")
    ap.add_argument("what", choices=["fa2", "fa3", "backward", "decode"])
    args = ap.parse_args()
    import torch
    lib = fl.Flashlab(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(20261201)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    if args.what == "decode":
        B, L = 8, 32768
        q = torch.randn(B, 32, 1, 128, generator=gen, **bf16)
        k, v = (torch.randn(B, 8, L, 128, generator=gen, **bf16) for _ in range(2))
        o = torch.empty_like(q)
        lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
        params, _workspace = lib.decode_params(q, k, v, o, lens, L)
        run = lambda: lib.decode(params)
    else:
        q, k, v, do = (torch.randn(1, 16, 8192, 128, generator=gen, **bf16) for _ in range(4))
        o = torch.empty_like(q)
        lse = torch.empty(1, 16, 8192, device="cuda", dtype=torch.float32)
        kernel = fl.FA3 if args.what == "fa3" else fl.FA2
        forward = lib.params(q, k, v, o, lse, kernel=kernel)
        run = lambda: lib.forward(forward)
        if args.what == "backward":
            run()
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            p = lib.backward_params(q, k, v, o, lse, do, dq, dk, dv)
            workspace = lib.backward(p)
            run = lambda: lib.backward(p, workspace)
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
