"""A kernel's blocks logged under Nsight Compute's counters: for each shape, a block-log program
(bench_block_log: fa2; bench_scalar_block_log: the scalar kernel; bench_backward_block_log: the
backward's main kernel) runs the kernel (a warm-up,
then --calls logged calls, each between cudaProfilerStart and Stop) under `ncu
--profile-from-start off`, so that each logged call has its own bytes; then
bench_l2_partitions says which partition each SM of this GPU reads through. A shape is
HEADS:N, or HEADS:N:causal for the causal mask; HEADS/KV_HEADS:N for a program of GQA grids
(the backward's: --kv-heads). Writes, beside PREFIX:

  PREFIX.csv                  the blocks (the program's rows, every shape and call)
  PREFIX-bytes.csv            heads, N, causal, call, dram_read_bytes, dram_written_bytes,
                              time_ns, sm_read_bytes (into the SMs), kv_heads; with
                              --by-operation also l2_reduction_miss_sectors
  PREFIX-l2-partitions.csv    bench_l2_partitions' placement and per-SM verdicts
  PREFIX-ncu.txt              Nsight Compute's lines, each prefixed with heads (HEADS/KV_HEADS
                              for GQA), N and causal
  PREFIX-steps.csv            with --steps: when each block began each step (the program's
                              --steps-csv rows, every shape and call; the scalar kernel's
                              and the backward's)

which `./build/bench/simulator/fa2_dram_vs_block_log` (fa2's) and `scalar_l1_vs_block_log`
(the scalar kernel's, PREFIX ending -scalar-block-log) read from bench/results:

  python3 bench/gpu/block_log.py --program build/bench/bench_block_log \\
      --partitions-program build/bench/bench_l2_partitions \\
      --shape 16:65536 --shape 1:196608 --calls 2 --prefix bench/results/DATE-h200-fa2-block-log
  python3 bench/gpu/block_log.py --program build/bench/bench_scalar_block_log \\
      --partitions-program build/bench/bench_l2_partitions --shape 16:8192:causal \\
      --calls 2 --prefix bench/results/DATE-h200-scalar-block-log
  python3 bench/gpu/block_log.py --program build/bench/bench_backward_block_log \\
      --partitions-program build/bench/bench_l2_partitions --shape 16/2:10240:causal --steps \\
      --calls 2 --prefix bench/results/DATE-h100-backward-block-log

(`backward_dram_vs_block_log` replays the backward's.)
"""
import argparse
import collections
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

METRICS = ("dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,"
           "l1tex__m_xbar2l1tex_read_bytes.sum")
# --by-operation: the L2's sectors of reductions that missed. Each such miss is a sector the L2
# fetched from DRAM to add into (the backward's dQ accumulator; on an H100 at 16 query heads
# over 16 KV heads, N = 8,192, where the accumulator is read once, it counted exactly its 64
# MiB), so the DRAM read splits into the reductions' and the loads' (docs/IO-LEVELS.md, "The
# backward's DRAM reads by operation").
REDUCTION_MISSES = "lts__t_sectors_op_red_lookup_miss.sum"


def shape(text):
    """HEADS:N[:causal], or HEADS/KV_HEADS:N[:causal] for a program of GQA grids (the backward's):
    (heads, kv_heads or None, n, causal)."""
    parts = text.split(":")
    causal = len(parts) == 3 and parts[2] == "causal"
    try:
        if len(parts) not in (2, 3) or (len(parts) == 3 and not causal):
            raise ValueError
        heads_text, _, kv_text = parts[0].partition("/")
        heads, n = int(heads_text), int(parts[1])
        kv_heads = int(kv_text) if kv_text else None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape {text!r}: give HEADS:N or HEADS:N:causal, e.g. 16:65536 "
            "(HEADS/KV_HEADS for GQA, e.g. 16/2:10240:causal)")
    if heads < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: heads and N are at least 1")
    if kv_heads is not None and (kv_heads < 1 or heads % kv_heads != 0):
        raise argparse.ArgumentTypeError(
            f"shape {text!r}: KV heads divide the heads (16/2, 16/4, ...)")
    return heads, kv_heads, n, causal


def shape_label(heads, kv_heads):
    """HEADS, or HEADS/KV_HEADS where they differ: how the messages and PREFIX-ncu.txt name a
    shape's heads."""
    return f"{heads}/{kv_heads}" if kv_heads != heads else f"{heads}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", required=True, help="bench_block_log")
    ap.add_argument("--partitions-program", required=True, help="bench_l2_partitions")
    ap.add_argument("--shape", type=shape, action="append", required=True, help="HEADS:N")
    ap.add_argument("--calls", type=int, default=2, help="logged calls a shape")
    ap.add_argument("--prefix", required=True, help="the output files' common path")
    ap.add_argument("--steps", action="store_true",
                    help="also log when each block began each step (PREFIX-steps.csv)")
    ap.add_argument("--clock-control", choices=("base", "none"), default="base",
                    help="Nsight Compute's clocks: base (its default, locked at the base clock; "
                         "every log stored up to 2026-12-07) or none (the card's own boost, as "
                         "`flashlab compare` measures)")
    ap.add_argument("--by-operation", action="store_true",
                    help="also count the L2's reduction sectors that missed "
                         "(l2_reduction_miss_sectors): the DRAM reads of the reductions")
    args = ap.parse_args()
    metrics = METRICS + ("," + REDUCTION_MISSES if args.by_operation else "")
    ncu_lines = []  # every shape's, each prefixed with its label, N and causal
    by_shape = collections.OrderedDict()  # (heads, kv_heads, N, causal): Nsight Compute's lines
    logs = [(".csv", "log.csv")] + ([("-steps.csv", "steps.csv")] if args.steps else [])
    with tempfile.TemporaryDirectory() as tmp:
        outs = {suffix: open(args.prefix + suffix, "w") for suffix, _ in logs}
        for i, (heads, kv_given, n, causal) in enumerate(args.shape):
            kv_heads = kv_given or heads
            label = shape_label(heads, kv_heads)
            log, steps = os.path.join(tmp, "log.csv"), os.path.join(tmp, "steps.csv")
            run = subprocess.run(
                ["ncu", "--csv", "--profile-from-start", "off", "--clock-control",
                 args.clock_control, "--metrics", metrics,
                 args.program, "--heads", str(heads), "--n", str(n), "--calls", str(args.calls),
                 "--csv", log] + (["--causal"] if causal else [])
                + (["--steps-csv", steps] if args.steps else [])
                + (["--kv-heads", str(kv_given)] if kv_given else []),
                capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"block_log: {label}:{n}: exit {run.returncode}\n{run.stderr[-2000:]}")
            lines = [line for line in run.stdout.splitlines() if line.startswith('"')]
            by_shape.setdefault((heads, kv_heads, n, int(causal)), []).extend(lines)
            ncu_lines += [f"{label},{n},{int(causal)},{line}" for line in lines]
            for suffix, name in logs:  # each shape's rows under the first shape's header
                with open(os.path.join(tmp, name)) as f:
                    header = f.readline()
                    if i == 0:
                        outs[suffix].write(header)
                    outs[suffix].writelines(f)
            print(f"{label}:{n} logged", flush=True)
        for out in outs.values():
            out.close()
    with open(args.prefix + "-ncu.txt", "w") as f:
        f.writelines(line + "\n" for line in ncu_lines)
    # A row a call: the profiled launches of a shape are its logged calls, in order.
    with open(args.prefix + "-bytes.csv", "w") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["heads", "N", "causal", "call", "dram_read_bytes", "dram_written_bytes",
                      "time_ns", "sm_read_bytes", "kv_heads"]
                     + (["l2_reduction_miss_sectors"] if args.by_operation else []))
        for (heads, kv_heads, n, causal), lines in by_shape.items():
            label = shape_label(heads, kv_heads)
            calls = collections.OrderedDict()
            for row in ncu_csv.metric_rows(lines):
                calls.setdefault(row["ID"], {})[row["Metric Name"]] = row["Metric Value"]
            if len(calls) != args.calls:
                sys.exit(f"block_log: {label}:{n}: Nsight Compute read {len(calls)} launches, "
                         f"not the {args.calls} logged calls")
            for call, m in enumerate(calls.values()):
                if args.by_operation and REDUCTION_MISSES not in m:
                    sys.exit(f"block_log: {label}:{n}: Nsight Compute gave no {REDUCTION_MISSES} "
                             "for --by-operation: run an ncu that knows the metric "
                             "(`ncu --query-metrics`), or leave --by-operation out")
                out.writerow([heads, n, causal, call, int(m["dram__bytes_read.sum"]),
                              int(m["dram__bytes_write.sum"]), int(m["gpu__time_duration.sum"]),
                              int(m["l1tex__m_xbar2l1tex_read_bytes.sum"]), kv_heads]
                             + ([int(m[REDUCTION_MISSES])] if args.by_operation else []))
    run = subprocess.run([args.partitions_program, "--csv", args.prefix + "-l2-partitions.csv"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"block_log: bench_l2_partitions: exit {run.returncode}\n{run.stdout[-2000:]}")


if __name__ == "__main__":
    main()
