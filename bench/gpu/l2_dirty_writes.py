"""When does a line written into the L2 reach DRAM: only when a later access needs its room
(write-back on eviction), or soon after it is written, while DRAM has time (early cleaning)?

The grid model writes a dirty line back only when it is evicted, and at short N it books fewer
DRAM writes during fa3's, the scalar kernel's and the naive kernel's calls than Nsight Compute
reads (docs/IO-LEVELS.md, "The writes during the kernel"). This program tells the two rules
apart: for each size X it first reads a clean buffer of 512 MiB (so the L2 holds nothing
dirty and nothing of the buffer below), then writes X MiB (torch's fill, one kernel), and
Nsight Compute reads the DRAM bytes written during that fill alone. With write-back on
eviction a fill that fits the L2 writes nothing to DRAM while it runs; with early cleaning it
writes up to X. A second kernel after it (a read of another clean buffer of X MiB, which
evicts nothing dirty until the L2 is full) says whether the lines left dirty are cleaned
between kernels.

  python3 bench/gpu/l2_dirty_writes.py --csv writes.csv [--mib 4 8 16 32 48 64 96]

runs itself under `ncu --cache-control none --profile-from-start off` and writes one row per
size and kernel: mib,
kernel (fill or read_after), dram_written_bytes, dram_read_bytes, time_ns.
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

METRICS = "dram__bytes_write.sum,dram__bytes_read.sum,gpu__time_duration.sum"
FLUSH_MIB = 512  # the clean read before each fill: far more than any L2 holds
FLOATS_PER_MIB = (1 << 20) // 4


def run_kernels(sizes):
    """Under ncu: for each size, a flush (not profiled), the fill and the read after it."""
    import torch  # only on the GPU machine

    flush = torch.ones(FLUSH_MIB * FLOATS_PER_MIB, dtype=torch.float32, device="cuda")
    for mib in sizes:
        buf = torch.empty(mib * FLOATS_PER_MIB, dtype=torch.float32, device="cuda")
        other = torch.ones(mib * FLOATS_PER_MIB, dtype=torch.float32, device="cuda")
        flush.sum()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        buf.fill_(float(mib))
        torch.cuda.synchronize()
        other.sum()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        del buf, other


def table(lines, sizes):
    """One row per profiled kernel, in launch order: a fill and a read per size."""
    launches = {}
    for row in ncu_csv.metric_rows(lines):
        launches.setdefault(row["ID"], {})[row["Metric Name"]] = row["Metric Value"]
    ordered = [launches[k] for k in sorted(launches, key=int)]
    if len(ordered) != 2 * len(sizes):
        raise SystemExit(f"l2_dirty_writes: {len(ordered)} kernels profiled, "
                         f"{2 * len(sizes)} expected (a fill and a read per size)")
    rows = []
    for i, m in enumerate(ordered):
        rows.append({"mib": sizes[i // 2], "kernel": "fill" if i % 2 == 0 else "read_after",
                     "dram_written_bytes": int(m["dram__bytes_write.sum"]),
                     "dram_read_bytes": int(m["dram__bytes_read.sum"]),
                     "time_ns": int(m["gpu__time_duration.sum"])})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", help="write the rows here")
    ap.add_argument("--mib", type=int, nargs="+", default=[4, 8, 16, 24, 32, 48, 64, 96])
    ap.add_argument("--kernels-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if any(m < 1 or m > FLUSH_MIB // 2 for m in args.mib):
        sys.exit(f"l2_dirty_writes: --mib takes sizes from 1 to {FLUSH_MIB // 2}")
    if args.kernels_only:
        run_kernels(args.mib)
        return
    if not args.csv:
        sys.exit("l2_dirty_writes: give --csv FILE for the rows")
    # --cache-control none: Nsight Compute would otherwise flush the L2 (writing back what is
    # dirty) before each profiled kernel, the very state this program measures.
    run = subprocess.run(["ncu", "--csv", "--cache-control", "none", "--profile-from-start", "off",
                          "--metrics", METRICS,
                          sys.executable, os.path.abspath(__file__), "--kernels-only", "--mib",
                          *map(str, args.mib)], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"l2_dirty_writes: ncu exit {run.returncode}\n{run.stderr[-2000:]}")
    rows = table(run.stdout.splitlines(), args.mib)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['mib']:4d} MiB {r['kernel']:10s} DRAM written {r['dram_written_bytes'] / 2**20:8.2f}"
              f" MiB, read {r['dram_read_bytes'] / 2**20:8.2f} MiB, {r['time_ns'] / 1e3:8.1f} us")


if __name__ == "__main__":
    main()
