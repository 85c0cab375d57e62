"""The timing sweep that the forward (bench.py) and the backward (bench_backward.py) share:
every d, causal and N of ANCHORS.md's shapes, one CSV row per implementation, a line per
shape as it finishes, then the pass's own summary table."""
import csv

import flashlab_ctypes as fl

CSV_HEADER = ["d", "causal", "N", "B", "H", "impl", "ms", "tflops",
              "ratio_to_flash", "ratio_to_cudnn", "max_abs_diff_vs_cudnn"]


def run(args, head_dims, bench_shape, print_summary, label=""):
    """bench_shape(torch, do_bench, lib, d, causal, N, writer) -> {impl: (ms, tflops, ...)};
    label prefixes each progress line ("backward " or "")."""
    import torch
    from triton.testing import do_bench
    lib = fl.Flashlab(args.lib)
    summary = []
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_HEADER)
        for d in head_dims:
            for causal in (bool(c) for c in args.causal):
                for N in args.seq_lens:
                    rows = bench_shape(torch, do_bench, lib, d, causal, N, writer)
                    f.flush()
                    summary.append(((d, causal, N), rows))
                    print(f"{label}d={d} causal={int(causal)} N={N}: " + ", ".join(
                        f"{k} {v[1]:.1f}" for k, v in rows.items()), flush=True)
    print_summary(summary)
