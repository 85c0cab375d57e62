"""The backward pass: flashlab's backward (default: v3, the wgmma kernel; deterministic: v2
with its dQ kernel) against torch's flash and cuDNN SDPA backward, on the same tensors, in
the same process.

  python3 bench.py --lib build/gpu/libflashlab.so --pass backward --csv bwd.csv

Shapes as ANCHORS.md: bf16, H = 2048 / d, B = 16384 / N; FLOPs = 2.5x the forward's
(4 B H N^2 d, halved when causal): the five products S, dP, dV, dK, dQ against the
forward's two. Each time is the backward alone (the forward ran once, before), median of
triton.testing.do_bench, the implementations timed in turns (timing.interleaved_medians).
max|diff| compares each gradient with cuDNN's.
"""
import flashlab_ctypes as fl
import sweep
import timing

BACKWARD_FLOP_RATIO = 2.5
TORCH_BACKWARD = ["flash", "cudnn"]
IMPLS = ["bwd", "bwd_det"] + TORCH_BACKWARD


def torch_backward(torch, backend, q, k, v, do, causal):
    """The backward of one SDPA forward run under `backend`, as a callable (the graph is
    kept, so it can be timed again and again)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kind = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    with sdpa_kernel(kind):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)


def flashlab_backward(torch, lib, q, k, v, do, causal, deterministic):
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device="cuda", dtype=torch.float32)
    mask = fl.CAUSAL_TOP_LEFT if causal else fl.CAUSAL_NONE
    lib.forward(lib.params(q, k, v, o, lse, causal=mask, kernel=fl.FA2))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    p = lib.backward_params(q, k, v, o, lse, do, dq, dk, dv, causal=mask,
                            deterministic=deterministic)
    workspace = lib.backward(p)  # allocated once, reused by every timed run

    def run():
        lib.backward(p, workspace)
        return dq, dk, dv
    return run


def bench_shape(torch, do_bench, lib, d, causal, N, writer):
    B, H = 16384 // N, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(B * 1000003 + N * 101 + d + 7)
    q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(4))
    flops = BACKWARD_FLOP_RATIO * 4 * B * H * N * N * d / (2 if causal else 1)
    reference = [g.float() for g in torch_backward(torch, "cudnn", q, k, v, do, causal)()]
    fns, diffs = {}, {}
    for impl in IMPLS:
        try:
            if impl in TORCH_BACKWARD:
                fn = torch_backward(torch, impl, q, k, v, do, causal)
            else:
                fn = flashlab_backward(torch, lib, q, k, v, do, causal, impl == "bwd_det")
            grads = fn()
            torch.cuda.synchronize()
            diffs[impl] = max((g.float() - r).abs().max().item() for g, r in zip(grads, reference))
            fns[impl] = fn
        except RuntimeError as e:  # a backend that refuses the shape is reported, not fatal
            print(f"  {impl}: {e}", flush=True)
    # Timed in turns (timing.interleaved_medians): none owes its figure to its place.
    rows = {impl: (ms, flops / ms / 1e9, diffs[impl])
            for impl, ms in timing.interleaved_medians(do_bench, fns).items()}
    for impl, (ms, tflops, diff) in rows.items():
        ratio = {b: tflops / rows[b][1] if b in rows else float("nan") for b in TORCH_BACKWARD}
        writer.writerow([d, int(causal), N, B, H, impl, f"{ms:.4f}", f"{tflops:.1f}",
                         f"{ratio['flash']:.3f}", f"{ratio['cudnn']:.3f}", f"{diff:.3e}"])
    del q, k, v, do, reference
    torch.cuda.empty_cache()
    return rows


def print_summary(summary):
    print("\nBackward TFLOP/s (bf16, H = 2048/d, B = 16384/N, FLOPs = 2.5x forward); "
          "ratio = bwd (v3) / backend")
    print(f"{'d':>4} {'causal':>6} {'N':>6} | {'v3':>6} {'v2det':>6} | {'flash':>6} "
          f"{'cudnn':>6} | {'/flash':>6} {'/cudnn':>6} | max|diff| vs cudnn")
    for (d, causal, N), rows in summary:
        t = {k: v[1] for k, v in rows.items()}
        cell = lambda name: f"{t[name]:6.1f}" if name in t else f"{'-':>6}"
        ratio = lambda b: f"{t['bwd'] / t[b]:6.3f}" if 'bwd' in t and b in t else f"{'-':>6}"
        diff = f"{rows['bwd'][2]:.2e}" if 'bwd' in rows else "-"
        print(f"{d:4d} {int(causal):6d} {N:6d} | {cell('bwd')} {cell('bwd_det')} | "
              f"{cell('flash')} {cell('cudnn')} | {ratio('flash')} {ratio('cudnn')} | {diff}")


def run_sweep(args, head_dims):
    sweep.run(args, head_dims, bench_shape, print_summary, label="backward ")
