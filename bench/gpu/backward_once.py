"""The library's backward once, for Nsight Compute to read: B = 1, HEADS query heads over
KV_HEADS, N queries and keys, d = 128, causal (top-left), bf16, standard normal Q, K, V and dO
(torch.randn, as `flashlab compare` draws them), O and L from fa2's forward. Three backward
calls after the forward, each its three kernels.

The backward's DRAM reads with GQA depend on the SMs' clock (bench/gpu/NOTES.md, "The
backward's blocks logged"): its main kernel at Nsight Compute's base clock and at the card's
own boost, kernel replay, two metrics (2026-12-07, an H100):

  ncu --metrics dram__bytes_read.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \\
      -k regex:fa3_backward python3 bench/gpu/backward_once.py --lib build/gpu/libflashlab.so \\
      --n 10240 --kv-heads 2
  ncu --clock-control none --metrics ... (the same)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlab_ctypes as fl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libflashlab.so")
    ap.add_argument("--n", type=int, required=True, help="queries and keys per head")
    ap.add_argument("--heads", type=int, default=16, help="query heads")
    ap.add_argument("--kv-heads", type=int, default=16, help="KV heads, dividing --heads")
    ap.add_argument("--calls", type=int, default=3, help="backward calls after the forward")
    args = ap.parse_args()
    if args.n < 1 or args.heads < 1 or args.kv_heads < 1 or args.heads % args.kv_heads:
        sys.exit(f"backward_once: N = {args.n}, {args.heads} heads over {args.kv_heads}: give "
                 "N >= 1 and KV heads that divide the heads")
    import torch
    lib = fl.Flashlab(args.lib)
    d = 128

    def randn(heads):
        return torch.randn(1, heads, args.n, d, device="cuda", dtype=torch.bfloat16)

    q, k, v, do = randn(args.heads), randn(args.kv_heads), randn(args.kv_heads), randn(args.heads)
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device="cuda", dtype=torch.float32)
    lib.forward(lib.params(q, k, v, o, lse, causal=fl.CAUSAL_TOP_LEFT, kernel=fl.FA2))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    p = lib.backward_params(q, k, v, o, lse, do, dq, dk, dv, causal=fl.CAUSAL_TOP_LEFT)
    workspace = lib.backward(p)
    for _ in range(args.calls - 1):
        lib.backward(p, workspace)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
