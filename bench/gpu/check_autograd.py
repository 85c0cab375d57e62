"""flashlab's attention as a torch.autograd.Function (flashlab_ctypes.attention_function),
checked against torch: gradients of a scalar loss through flashlab's forward and backward
against the same through torch's math attention in fp64 (the reference) and in bf16 (the
naive baseline), under ANCHORS.md's rule: max error <= 3x the bf16 baseline's, per
gradient. With dropout, torch's math attention multiplies by the mask that flashlab exports
(flashlab_dropout_mask), Z = keep / (1 - p). A check of the C ABI and the autograd glue as a
torch user meets them; the
kernel's own tests are tests/gpu/test_backward.cpp.

  python3 check_autograd.py --lib build/gpu/libflashlab.so
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlab_ctypes as fl  # noqa: E402

RULE = 3.0
# (B, Hq, Hkv, N_q, N_k, d, causal): awkward sizes, GQA, both alignments.
CASES = [(1, 2, 2, 97, 97, 64, fl.CAUSAL_NONE), (2, 4, 2, 113, 203, 128, fl.CAUSAL_TOP_LEFT),
         (1, 4, 1, 203, 113, 64, fl.CAUSAL_BOTTOM_RIGHT), (1, 1, 1, 1023, 1023, 128,
                                                           fl.CAUSAL_TOP_LEFT)]
# The same with dropout: (..., causal, p); the mask is drawn by (seed, offset) below.
DROPOUT_CASES = [(1, 2, 2, 97, 97, 64, fl.CAUSAL_NONE, 0.5),
                 (2, 4, 2, 113, 203, 128, fl.CAUSAL_BOTTOM_RIGHT, 0.2)]
DROPOUT_SEED, DROPOUT_OFFSET = 0x5EED5EED1234, 7


def math_attention(torch, q, k, v, causal, z=None):
    """Three operators in q's dtype, GQA by repeating K and V, either causal alignment;
    z (B, Hq, N_q, N_k), if given, multiplies the weights (dropout), rounded again."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal != fl.CAUSAL_NONE:
        n_q, n_k = q.shape[2], k.shape[2]
        offset = 0 if causal == fl.CAUSAL_TOP_LEFT else n_k - n_q
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        s = s.masked_fill(j > i + offset, float("-inf"))
    p = torch.softmax(s.float(), dim=-1).to(q.dtype).nan_to_num(0.0)
    if z is not None:
        p = p * z.to(q.dtype)
    return p @ v


def grads(torch, fn, q, k, v, do):
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    o = fn(q, k, v)
    return torch.autograd.grad(o, (q, k, v), do.to(o.dtype))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    import torch
    lib = fl.Flashlab(args.lib)
    failed = 0
    cases = [c + (0.0,) for c in CASES] + DROPOUT_CASES
    for B, Hq, Hkv, n_q, n_k, d, causal, p_drop in cases:
        gen = torch.Generator(device="cuda").manual_seed(n_q * 7 + n_k + d)
        q = torch.randn(B, Hq, n_q, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k, v = (torch.randn(B, Hkv, n_k, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                for _ in range(2))
        do = torch.randn(B, Hq, n_q, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        z = None
        if p_drop > 0:  # the mask flashlab draws, exported: Z = keep / (1 - p)
            keep = torch.empty(B, Hq, n_q, n_k, dtype=torch.uint8, device="cuda")
            lib.dropout_mask(keep, p_drop, DROPOUT_SEED, DROPOUT_OFFSET)
            z = keep.double() / (1.0 - p_drop)
        ref = grads(torch, lambda *x: math_attention(torch, *x, causal, z),
                    *(t.double() for t in (q, k, v)), do.double())
        low = grads(torch, lambda *x: math_attention(torch, *x, causal, z), q, k, v, do)
        got = grads(torch, fl.attention_function(lib, causal=causal, dropout_p=p_drop,
                                                 dropout_seed=DROPOUT_SEED,
                                                 dropout_offset=DROPOUT_OFFSET), q, k, v, do)
        for name, g, l, r in zip(("dQ", "dK", "dV"), got, low, ref):
            err = (g.double() - r).abs().max().item()
            err_low = (l.double() - r).abs().max().item()
            ok = err <= RULE * err_low + 1e-6  # 1e-6: an exactly-zero baseline (see the C++ slack)
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} B={B} Hq={Hq} Hkv={Hkv} N_q={n_q} N_k={n_k} d={d} "
                  f"causal={causal} p={p_drop} {name}: err {err:.3e}, bf16 math {err_low:.3e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
