"""Times flashlab's GPU kernels against torch's scaled_dot_product_attention backends on the
same tensors, in the same process, and summarises Nsight Compute's byte counts.

  python3 bench.py --lib build/gpu/libflashlab.so --csv out.csv     # the timing sweep
  python3 bench.py --lib ... --ncu-one fa2                          # one forward, for ncu
  python3 bench.py --lib ... --ncu-one fa2 --shape 1,16,4,4096,128  # B,Hq,Hkv,N,d (GQA)
  python3 bench.py --lib ... --ncu-one cudnn --shape 16,32,32,1024,64 --causal 1   # masked
  python3 bench.py --summarize-ncu ncu_naive.csv ncu_fa2.csv ...    # bytes vs prediction
  python3 bench.py --lib ... --pass backward --csv bwd.csv          # the backward sweep
                                                                    # (bench_backward.py)
  python3 bench.py --lib ... --pass backward --head-dims 64 --causal 1   # one part of it
  python3 bench.py --lib ... --decode --csv decode.csv               # decode (bench_decode.py)
  python3 bench.py --lib ... --ablation --csv ablation.csv          # fa3's switches, one by one
  python3 bench.py --lib ... --ablation --ablation-d 64 --csv ablation64.csv   # the same at d = 64
  python3 bench.py --lib ... --impls fa3 fa3-persistent fa3-queue fa3-per-tile cudnn   # fa3's grids
  python3 bench.py --lib ... --impls fa3 fa3-sexp2 cudnn            # software exponentials
  python3 bench.py --lib ... --impls fa3 fa3-across cudnn           # consumers across items
  python3 bench.py --lib ... --impls fa3 fa3-kv37 cudnn             # sections on 37% of the L2

Shapes follow ANCHORS.md: hidden size 2048, so H = 2048 / d and B = 16384 / N; bf16;
FLOPs = 4 B H N^2 d for the forward, halved when causal. Times are medians of
triton.testing.do_bench (which clears the L2 before every run), the implementations of a
shape timed in turns, each equally often in every place of the order and after every other
(timing.interleaved_medians, balanced_orders: timed one after the other, a call read up to 8%
faster for coming first; timed always right after cuDNN, 3 to 7% slower).
"""
import argparse
import functools
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlab_ctypes as fl  # noqa: E402
import bench_backward  # noqa: E402
import bench_decode  # noqa: E402
import ncu_csv  # noqa: E402
import sweep  # noqa: E402
import timing  # noqa: E402

HIDDEN = 2048
TOKENS = 16384
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384]
HEAD_DIMS = [64, 128]
SCALAR_SEQ_LENS = {512, 2048, 8192}  # the scalar kernel is slow by design: a few points
MATH_MAX_SEQ = 2048                  # torch's math backend materialises S and P
TORCH_BACKENDS = ["flash", "cudnn", "efficient", "math"]
NCU_SHAPE = dict(B=1, H=16, N=8192, d=128)
ABLATION_SHAPE = dict(N=8192, d=128)  # fa3's switches timed at d = 128, N = 8192 (NOTES.md)
BYTES_BF16 = 2


def flops(B, H, N, d, causal):
    return 4 * B * H * N * N * d / (2 if causal else 1)


def make_inputs(torch, B, H, N, d):
    gen = torch.Generator(device="cuda").manual_seed(B * 1000003 + N * 101 + d)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in range(3))
    return q, k, v


def torch_call(torch, backend, q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    kind = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]

    def run():
        with sdpa_kernel(kind):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


# fa3 with one switch (flashlab/fa3.h) moved from its default, beside "fa3" (the library's
# defaults), so that both are timed in the same run: on one grid each (flashlab_fa3_grid),
# persistent in fixed turns, from a work queue, and one block per tile; with
# FlashAttention-4's software exponentials; and with the consumers running from one work
# item into the next (overlap_items = 1); without ping-pong, with 3 stages, with both, and with
# 2 stages and ping-pong (the last two: d = 64's and d = 128's defaults in 2026-12, see
# fa3::default_stages): the ablation's run-time switches, for a sweep over N. At d = 64 turning
# ping-pong on, or running across items, also turns off the consumers' leaving out of the KV
# tiles their rows do not see (fa3::consumers_skip_unseen): those variants measure both.
FA3_VARIANTS = {"fa3-persistent": dict(grid=fl.FA3_GRID_PERSISTENT),
                "fa3-queue": dict(grid=fl.FA3_GRID_QUEUE),
                "fa3-per-tile": dict(grid=fl.FA3_GRID_PER_TILE),
                "fa3-sexp2": dict(software_exp2=1),
                "fa3-across": dict(overlap_items=1),
                "fa3-noping": dict(ping_pong=0),
                "fa3-3stages": dict(stages=3),
                "fa3-noping-3st": dict(ping_pong=0, stages=3),
                "fa3-ping-2st": dict(ping_pong=1, stages=2),
                "fa3-2stages": dict(stages=2),
                "fa3-ping": dict(ping_pong=1)}


# fa3 with its tile order's sections planned on P percent of the L2 (kv_l2_share, flashlab/fa3.h),
# named fa3-kv<P>: `--impls fa3 fa3-kv37 cudnn` times it beside fa3, and --ncu-one takes the name.
FA3_SHARE_PREFIX = "fa3-kv"


def fa3_share_variant(impl):
    """The switches of fa3-kv<P>, or None for any other name."""
    if not impl.startswith(FA3_SHARE_PREFIX) or not impl[len(FA3_SHARE_PREFIX):].isdigit():
        return None
    return dict(kv_l2_share=int(impl[len(FA3_SHARE_PREFIX):]))


def fa3_variant(impl):
    """The switches an fa3 variant's name stands for, or None where it names none."""
    return FA3_VARIANTS.get(impl) or fa3_share_variant(impl)


# A kernel from a second library (bench.py --baseline-lib; which one: --baseline-kernel, fa3
# unless said), with its defaults, timed in turns with this one's as "<kernel>-baseline": two
# builds of the kernel compared in one process, against the same cuDNN.
BASELINE_SUFFIX = "-baseline"


def is_baseline(impl):
    return impl.endswith(BASELINE_SUFFIX)


def is_flashlab(impl):
    return impl in fl.KERNELS or fa3_variant(impl) is not None or is_baseline(impl)


def flashlab_call(lib, kernel, q, k, v, o, lse, causal):
    """kernel: a name of fl.KERNELS, or an fa3 variant's (fa3 with those switches)."""
    switches = fa3_variant(kernel)
    p = lib.params(q, k, v, o, lse, causal=fl.CAUSAL_TOP_LEFT if causal else fl.CAUSAL_NONE,
                   kernel=fl.FA3 if switches is not None else fl.KERNELS[kernel])
    if switches is not None:
        options = lib.fa3_default_options()
        for field, value in switches.items():
            setattr(options, field, value)
        return lambda: lib.forward_fa3(p, options)
    return lambda: lib.forward(p)


def implementations(N, only=None, baseline=None):
    """What the sweep times at N; `only` (bench.py --impls) keeps those named; `baseline`:
    the kernel of the second library's to time too, if any."""
    # FLASHLAB_SKIP_FA3=1 leaves fa3 out: a fault on the device ends the process's CUDA
    # context, and with it every later timing of the sweep.
    skip_fa3 = os.environ.get("FLASHLAB_SKIP_FA3", "") not in ("", "0")
    shares = [i for i in only or [] if fa3_share_variant(i)]
    impls = ([] if skip_fa3 else ["fa3", *FA3_VARIANTS, *shares]) + ["fa2", "naive"]
    if baseline and not (skip_fa3 and baseline == "fa3"):
        impls += [baseline + BASELINE_SUFFIX]
    impls += ["scalar"] if N in SCALAR_SEQ_LENS else []
    impls += [b for b in TORCH_BACKENDS if b != "math" or N <= MATH_MAX_SEQ]
    return [i for i in impls if only is None or i in only or is_baseline(i)]


def bench_shape(torch, do_bench, lib, d, causal, N, writer, only=None, baseline_lib=None,
                baseline_kernel="fa3", orders=timing.balanced_orders):
    B, H = TOKENS // N, HIDDEN // d
    q, k, v = make_inputs(torch, B, H, N, d)
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    reference = torch_call(torch, "cudnn", q, k, v, causal)().float()
    fns, diffs = {}, {}
    for impl in implementations(N, only, baseline_kernel if baseline_lib else None):
        if is_baseline(impl):
            fn = flashlab_call(baseline_lib, baseline_kernel, q, k, v, o, lse, causal)
        elif is_flashlab(impl):
            fn = flashlab_call(lib, impl, q, k, v, o, lse, causal)
        else:
            fn = torch_call(torch, impl, q, k, v, causal)
        try:
            out = fn()
            torch.cuda.synchronize()
            result = o if is_flashlab(impl) else out
            diffs[impl] = (result.float() - reference).abs().max().item()
            fns[impl] = fn
        except RuntimeError as e:  # a backend that refuses the shape is reported, not fatal
            print(f"  {impl}: {e}", flush=True)
    # Timed in turns (timing.interleaved_medians): none owes its figure to its place or to
    # the call before it.
    times = timing.interleaved_medians(do_bench, fns, orders=orders)
    rows = {impl: (ms, flops(B, H, N, d, causal) / ms / 1e9, diffs[impl])
            for impl, ms in times.items()}
    for impl, (ms, tflops, max_diff) in rows.items():
        ratio = {b: tflops / rows[b][1] if b in rows else float("nan") for b in ("flash", "cudnn")}
        writer.writerow([d, int(causal), N, B, H, impl, f"{ms:.4f}", f"{tflops:.1f}",
                         f"{ratio['flash']:.3f}", f"{ratio['cudnn']:.3f}", f"{max_diff:.3e}"])
    del q, k, v, o, lse, reference
    torch.cuda.empty_cache()
    return rows


def print_summary(summary):
    print("\nTFLOP/s (bf16, H = 2048/d, B = 16384/N); ratio = kernel / backend")
    print(f"{'d':>4} {'causal':>6} {'N':>6} | {'fa3':>6} {'fa2':>6} {'naive':>6} {'scalar':>6} | "
          f"{'flash':>6} {'cudnn':>6} {'effic':>6} {'math':>6} | {'fa2/fl':>6} {'fa2/cd':>6}"
          f" {'fa3/cd':>6} | {'pers/cd':>7} {'queue/cd':>8} {'tile/cd':>7} {'sexp2/cd':>8}"
          f" {'acrs/cd':>8} | "
          f"max|diff| vs cudnn: fa2, fa3, fa3-sexp2")
    for (d, causal, N), rows in summary:
        t = {k: v[1] for k, v in rows.items()}
        cell = lambda name: f"{t[name]:6.1f}" if name in t else f"{'-':>6}"
        ratio = lambda a, b: f"{t[a] / t[b]:6.3f}" if a in t and b in t else f"{'-':>6}"
        diff = lambda a: f"{rows[a][2]:.2e}" if a in rows else "-"
        print(f"{d:4d} {int(causal):6d} {N:6d} | {cell('fa3')} {cell('fa2')} {cell('naive')} "
              f"{cell('scalar')} | {cell('flash')} {cell('cudnn')} {cell('efficient')} "
              f"{cell('math')} | {ratio('fa2', 'flash')} {ratio('fa2', 'cudnn')} "
              f"{ratio('fa3', 'cudnn')} | {ratio('fa3-persistent', 'cudnn'):>7} "
              f"{ratio('fa3-queue', 'cudnn'):>8} {ratio('fa3-per-tile', 'cudnn'):>7} "
              f"{ratio('fa3-sexp2', 'cudnn'):>8} {ratio('fa3-across', 'cudnn'):>8} | "
              f"{diff('fa2')}, {diff('fa3')}, {diff('fa3-sexp2')}")


def run_sweep(args):
    baseline = fl.Flashlab(args.baseline_lib) if args.baseline_lib else None
    sweep.run(args, args.head_dims,
              functools.partial(bench_shape, only=args.impls, baseline_lib=baseline,
                                baseline_kernel=args.baseline_kernel,
                                orders=timing.ORDERS[args.turns]), print_summary)


def ablation_options(fl_lib, d):
    """The default switches first (as they resolve at head dimension d), then each switch
    moved away from its default alone, then everything off: the FlashAttention-3 ablation,
    one idea at a time."""
    default = fl_lib.fa3_resolved_options(d, fl_lib.fa3_default_options())
    def variant(**changes):
        # Every field as the default has it (a field added to flashlab_fa3_options later
        # included), then the changes.
        options = fl.Fa3Options.from_buffer_copy(default)
        for field, value in changes.items():
            setattr(options, field, value)
        return options
    # The conditional rule's kernels run items one after the other whatever overlap_items
    # says (fa3.h).
    out = [variant(), variant(conditional_rescale=1 - default.conditional_rescale)]
    out += [variant(overlap_items=1 - default.overlap_items)]
    # The software exponentials are compiled without the conditional rule: moved alone.
    out += [variant(software_exp2=1 - default.software_exp2, conditional_rescale=0)]
    out += [variant(grid=g)
            for g in (fl.FA3_GRID_PERSISTENT, fl.FA3_GRID_QUEUE, fl.FA3_GRID_PER_TILE)
            if g != default.grid]
    out += [variant(stages=s) for s in (1, 2, 3) if s != default.stages]
    out += [variant(warp_specialized=0), variant(ping_pong=1 - default.ping_pong),
            variant(intra_overlap=0),
            variant(ping_pong=0, intra_overlap=0),
            variant(warp_specialized=0, ping_pong=0, intra_overlap=0, stages=1)]
    return out


def rescale_counts(torch, lib, params, options):
    """Under the conditional rule, one more (untimed) run that counts on the device what every
    (row, tile) update did; {} for the standard rule."""
    if not options.conditional_rescale:
        return {}
    counts = torch.zeros(len(fl.RESCALE_COUNT_NAMES), device="cuda", dtype=torch.int64)
    counting = fl.Fa3Options.from_buffer_copy(options)
    counting.rescale_counts = counts.data_ptr()
    lib.forward_fa3(params, counting)
    return dict(zip(fl.RESCALE_COUNT_NAMES, counts.tolist()))


def run_ablation(args):
    """fa3 with each switch (flashlab/fa3.h) at N = 8192, bf16 (d = 128, or --ablation-d),
    against cuDNN in the same run; every variant's output is compared with cuDNN's. At d = 64
    only the run-time switches (stages, ping-pong, grid), conditional rescaling and the
    software exponentials are compiled; the others are reported as refused."""
    import torch
    from triton.testing import do_bench
    lib = fl.Flashlab(args.lib)
    N, d = ABLATION_SHAPE["N"], args.ablation_d
    B, H = TOKENS // N, HIDDEN // d
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["d", "causal", "N", "B", "H", "impl", "warp_specialized", "stages",
                         "ping_pong", "intra_overlap", "conditional_rescale", "ms", "tflops",
                         "ratio_to_cudnn", "max_abs_diff_vs_cudnn", "rescaled", "skipped",
                         "grid", "software_exp2", "overlap_items"])
        for causal in (False, True):
            q, k, v = make_inputs(torch, B, H, N, d)
            o = torch.empty_like(q)
            lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
            cudnn = torch_call(torch, "cudnn", q, k, v, causal)
            reference = cudnn().float()
            p = lib.params(q, k, v, o, lse,
                           causal=fl.CAUSAL_TOP_LEFT if causal else fl.CAUSAL_NONE, kernel=fl.FA3)
            # Every variant that runs, checked against cuDNN, then all of them and cuDNN timed
            # in turns (timing.interleaved_medians).
            fns, diffs, variants = {"cudnn": cudnn}, {}, {}
            for i, options in enumerate(ablation_options(lib, d)):
                fn = (lambda opt: lambda: lib.forward_fa3(p, opt))(options)
                try:
                    fn()
                    torch.cuda.synchronize()
                    diffs[i] = (o.float() - reference).abs().max().item()
                except RuntimeError as e:
                    print(f"  fa3 {options.describe()}: {e}", flush=True)
                    continue
                fns[i], variants[i] = fn, options
            times = timing.interleaved_medians(do_bench, fns, orders=timing.ORDERS[args.turns])
            cudnn_ms = times["cudnn"]
            cudnn_tflops = flops(B, H, N, d, causal) / cudnn_ms / 1e9
            writer.writerow([d, int(causal), N, B, H, "cudnn", "", "", "", "", "",
                             f"{cudnn_ms:.4f}", f"{cudnn_tflops:.1f}", "1.000", "0", "", "", "",
                             "", ""])
            print(f"\nd={d} N={N} causal={int(causal)}: cudnn {cudnn_tflops:.1f} TFLOP/s")
            for i, options in variants.items():
                ms, diff = times[i], diffs[i]
                tflops = flops(B, H, N, d, causal) / ms / 1e9
                counts = rescale_counts(torch, lib, p, options)
                writer.writerow([d, int(causal), N, B, H, "fa3", options.warp_specialized,
                                 options.stages, options.ping_pong, options.intra_overlap,
                                 options.conditional_rescale, f"{ms:.4f}", f"{tflops:.1f}",
                                 f"{tflops / cudnn_tflops:.3f}", f"{diff:.3e}",
                                 counts.get("rescaled", ""), counts.get("skipped", ""),
                                 options.grid, options.software_exp2, options.overlap_items])
                f.flush()
                print(f"  fa3 {options.describe():52s} {tflops:7.1f} TFLOP/s "
                      f"{tflops / cudnn_tflops:6.3f}x cudnn  max|diff| {diff:.2e}"
                      + (f"  rescaled {counts['rescaled']} skipped {counts['skipped']} "
                         f"(of {counts['rescaled'] + counts['skipped']} growths)"
                         if counts else ""), flush=True)
            del q, k, v, o, lse, reference
            torch.cuda.empty_cache()


def parse_shape(text):
    """"B,Hq,Hkv,N,d" into a dict; Hkv must divide Hq (GQA; Hkv = 1 is MQA)."""
    try:
        B, Hq, Hkv, N, d = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: give five whole numbers B,Hq,Hkv,N,d")
    if min(B, Hq, Hkv, N, d) < 1 or Hq % Hkv:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: sizes >= 1 and Hkv dividing Hq")
    return dict(B=B, H=Hq, Hkv=Hkv, N=N, d=d)


def run_ncu_one(args):
    """One forward of one implementation between cudaProfilerStart/Stop, after a warm-up
    outside that range (module load, cuBLAS handle, first-touch allocations)."""
    import torch
    s = args.shape or dict(NCU_SHAPE, Hkv=NCU_SHAPE["H"])
    q, _, _ = make_inputs(torch, s["B"], s["H"], s["N"], s["d"])
    _, k, v = make_inputs(torch, s["B"], s["Hkv"], s["N"], s["d"])
    o = torch.empty_like(q)
    lse = torch.empty(s["B"], s["H"], s["N"], device="cuda", dtype=torch.float32)
    causal = args.causal == [1]  # `--causal 1` alone: the causal mask (else none)
    if is_flashlab(args.ncu_one):
        fn = flashlab_call(fl.Flashlab(args.lib), args.ncu_one, q, k, v, o, lse, causal)
    else:
        fn = torch_call(torch, args.ncu_one, q, k, v, causal)
    fn()
    ncu_csv.profile_call(torch, fn, first_read_too=args.first_read)


def predicted_sm_bytes(lib, impl):
    """The closed-form traffic between the L2 and the SMs (read + written) of one forward at
    NCU_SHAPE: what a two-level (HBM + SRAM) model counts for the kernel as the library
    describes it (flashlab_kernel_info), every tile load a transfer, each GEMM operand read
    once (cuBLAS re-reads panels, so naive's measured figure is higher)."""
    if impl not in fl.KERNELS:
        return None
    B, H, N, d = (NCU_SHAPE[x] for x in ("B", "H", "N", "d"))
    info = lib.kernel_info(fl.KERNELS[impl], d, fl.BF16)
    heads = B * H
    qkvo = N * d * BYTES_BF16                   # one (N, d) bf16 matrix
    lse = N * 4
    if info.br > 0:  # K and V read kv_passes times per query tile; Q read and O written once
        tiles = -(-N // info.br)  # query tiles, the last one partly empty where Br does not divide N
        return heads * (2 * qkvo + tiles * info.kv_passes * 2 * qkvo + lse)
    # S (fp32) written and read back s_hbm_reads times; P written and read by P V
    s_bytes, p_bytes = N * N * 4, N * N * BYTES_BF16
    return heads * (4 * qkvo + (1 + info.s_hbm_reads) * s_bytes + 2 * p_bytes + lse)


def summarize_ncu(lib, paths):
    metrics = ["l1tex__m_xbar2l1tex_read_bytes.sum", "l1tex__m_l1tex2xbar_write_bytes.sum",
               "lts__t_bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
               "gpu__time_duration.sum"]
    # The store and reduction sectors the L1 issued (32 bytes each): what the mirrors' writes
    # count; SM write (what left the SMs) is those or fewer (docs/IO-LEVELS.md).
    sectors = ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"]
    print("\nNsight Compute, one forward at B=1, H=16, N=8192, d=128, bf16, non-causal")
    print("(predicted: closed-form bytes between the L2 and the SMs of a two-level HBM + SRAM"
          " model for each kernel's tile sizes; compare with SM read + SM write;"
          " L1 stores: store + reduction sectors issued, x 32 B)")
    print(f"{'impl':>10} {'kernels':>7} {'SM read':>10} {'SM write':>10} {'L2 bytes':>10}"
          f" {'DRAM read':>10} {'DRAM write':>10} {'L1 stores':>10} {'predicted':>10}"
          f" {'ratio':>6} {'time ms':>9}")
    for path in paths:
        impl = os.path.basename(path).removeprefix("ncu_").removesuffix(".csv")
        totals, kernels = {m: 0.0 for m in metrics + sectors}, set()
        with open(path) as f:
            rows = ncu_csv.metric_rows_without_first_read(ncu_csv.metric_rows(f))
        for row in rows:
            if row["Metric Name"] in totals:
                totals[row["Metric Name"]] += row["Metric Value"]
                kernels.add(row["ID"])
        pred = predicted_sm_bytes(lib, impl)
        sm = totals[metrics[0]] + totals[metrics[1]]
        pred_s = f"{pred / 1e9:9.3f}G" if pred else f"{'-':>10}"
        ratio_s = f"{sm / pred:6.3f}" if pred else f"{'-':>6}"
        gb = [f"{totals[m] / 1e9:9.3f}G" for m in metrics[:5]]
        gb.append(f"{32 * sum(totals[m] for m in sectors) / 1e9:9.3f}G")
        print(f"{impl:>10} {len(kernels):7d} {' '.join(gb)} {pred_s} {ratio_s} "
              f"{totals[metrics[5]] / 1e6:9.3f}")


def one_implementation(name):
    """--ncu-one's argument: a kernel, an fa3 variant or a torch backend."""
    if name in fl.KERNELS or fa3_variant(name) is not None or name in TORCH_BACKENDS:
        return name
    raise argparse.ArgumentTypeError(
        f"{name} is not one of {', '.join([*fl.KERNELS, *FA3_VARIANTS, *TORCH_BACKENDS])} "
        f"or {FA3_SHARE_PREFIX}<P> (fa3's sections on P percent of the L2, 1 to 100)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="path to libflashlab.so")
    ap.add_argument("--csv", default="bench_gpu.csv")
    ap.add_argument("--seq-lens", type=int, nargs="*", default=SEQ_LENS)
    ap.add_argument("--head-dims", type=int, nargs="*", choices=HEAD_DIMS, default=HEAD_DIMS,
                    help="the sweep's head dimensions (default: all)")
    ap.add_argument("--causal", type=int, nargs="*", choices=[0, 1], default=[0, 1],
                    help="the sweep's masks: 0 none, 1 causal (default: both); with --ncu-one, "
                    "1 alone for the causal mask")
    ap.add_argument("--impls", nargs="*", help="time only these (e.g. fa3 fa3-persistent fa3-queue "
                    "fa3-per-tile fa3-sexp2 fa2 flash cudnn; "
                    "cudnn is always the reference the outputs are compared with)")
    ap.add_argument("--baseline-lib", help="a second libflashlab.so, whose kernel (defaults) the "
                    f"sweep times as <kernel>{BASELINE_SUFFIX} in turns with --lib's")
    ap.add_argument("--baseline-kernel", choices=list(fl.KERNELS), default="fa3",
                    help="which of --baseline-lib's kernels (default fa3)")
    ap.add_argument("--turns", choices=list(timing.ORDERS), default="balanced",
                    help="the orders of the rounds (timing.py): balanced (every place, every "
                    "predecessor equally often; the default) or rotated (places only)")
    ap.add_argument("--ncu-one", type=one_implementation,
                    help="one call, for Nsight Compute: " + ", ".join(
                        [*fl.KERNELS, *FA3_VARIANTS, FA3_SHARE_PREFIX + "<P>", *TORCH_BACKENDS]))
    ap.add_argument("--shape", type=parse_shape, help="with --ncu-one: B,Hq,Hkv,N,d")
    ap.add_argument("--first-read", action="store_true",
                    help="with --ncu-one: start the profiled range with a read of its own "
                         "(ncu_csv.first_read; --summarize-ncu leaves it out)")
    ap.add_argument("--summarize-ncu", nargs="*")
    ap.add_argument("--pass", dest="which", choices=["forward", "backward"], default="forward",
                    help="which pass the timing sweep times")
    ap.add_argument("--decode", action="store_true", help="the split-KV decode benchmark")
    ap.add_argument("--decode-lengths", type=int, nargs="+", default=bench_decode.LENGTHS,
                    help="with --decode: the cache lengths timed at B = 8")
    ap.add_argument("--decode-batches", type=int, nargs="*", default=bench_decode.BATCHES,
                    help="with --decode: the batches timed at L = 32768 (none: no batch sweep)")
    ap.add_argument("--ablation", action="store_true",
                    help="time fa3's switches one by one at N = 8192 (d: --ablation-d)")
    ap.add_argument("--ablation-d", type=int, choices=HEAD_DIMS, default=ABLATION_SHAPE["d"],
                    help="the head dimension of --ablation (default 128)")
    args = ap.parse_args()
    if args.which == "backward":
        bench_backward.run_sweep(args, args.head_dims)
    elif args.decode:
        bench_decode.run_decode_sweep(args)
    elif args.ablation:
        run_ablation(args)
    elif args.summarize_ncu:
        summarize_ncu(fl.Flashlab(args.lib), args.summarize_ncu)
    elif args.ncu_one:
        run_ncu_one(args)
    else:
        run_sweep(args)


if __name__ == "__main__":
    main()
