"""The naive kernel's launches, one row each, under Nsight Compute: for every shape asked, one
call of `profile_one.py naive` (cuBLAS's S = Q K^T, the softmax, cuBLAS's O = P V) with the
metrics of a level each, and the kernel's name, from which cuBLAS's output tile is read
(nvjet_sm90_..._AxB_...: lessons/gpu_bridge/measured_h200.hpp, measured::kCublasTiles).
Nsight Compute runs in application replay after a first read of the call's own, left out
(ncu_csv.REPLAY, ncu_csv.first_read): the rows stored up to 2026-12-05 ran in kernel
replay without it, and each launch that read more than the L2 carried about 2.3 MiB
of Nsight Compute's own DRAM writes (docs/IO-LEVELS.md).

  python3 bench/gpu/naive_launches.py --lib build/gpu/libflashlab.so --heads 1 16 \\
      --n 1024 2048 4096 --d 64 > naive-kernels-d64.csv

The columns are those of bench/results/2026-12-03-h200-naive-kernels.csv. With --tiles it
prints each shape's entry for measured::kCublasTiles instead: N, d, heads and the two GEMMs'
tiles as {rows, columns} of the row-major output (a name's AxB is {B, A}).
"""
import argparse
import csv
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

METRICS = {  # column: metric
    "sm_read_bytes": "l1tex__m_xbar2l1tex_read_bytes.sum",
    "sm_write_bytes": "l1tex__m_l1tex2xbar_write_bytes.sum",
    "lts_bytes": "lts__t_bytes.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "time_ns": "gpu__time_duration.sum",
}
# cuBLAS's kernel names carry the output tile as _AxB_ after the variant (tss, tst, ...).
TILE = re.compile(r"^nvjet_sm90_[a-z]+_(\d+)x(\d+)_")


def tile_of(kernel_name):
    """{rows, columns} of the row-major output tile in an nvjet kernel's name, or None."""
    m = TILE.match(kernel_name)
    return (int(m.group(2)), int(m.group(1))) if m else None


def launches(lib, heads, n, d, ncu):
    """The rows of one call: every launch with its metrics, in launch order."""
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [ncu, "--profile-from-start", "off", *ncu_csv.REPLAY, "--csv", "--metrics",
           ",".join(METRICS.values()), sys.executable, os.path.join(here, "profile_one.py"),
           "--lib", lib, "naive", "--first-read", "--heads", str(heads), "--n", str(n), "--d",
           str(d)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"naive_launches: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    try:
        rows = ncu_csv.without_first_read(launch_rows(run.stdout.splitlines()))
    except ValueError as e:
        sys.exit(f"naive_launches: heads {heads}, N {n}, d {d}: {e}")
    if not rows:
        sys.exit(f"naive_launches: ncu profiled no launch of heads {heads}, N {n}, d {d}")
    return rows


def launch_rows(lines):
    """ncu's --csv lines as one row per launch, in launch order: its kernel, grid and the
    columns of METRICS."""
    rows = {}
    for r in ncu_csv.metric_rows(lines):
        row = rows.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"],
                                             "grid": r.get("Grid Size", "")})
        for column, metric in METRICS.items():
            if r["Metric Name"] == metric:
                row[column] = int(r["Metric Value"])
    return [rows[i] for i in sorted(rows)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libflashlab.so")
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--d", type=int, nargs="+", default=[64], choices=[64, 128])
    ap.add_argument("--ncu", default="ncu", help="the Nsight Compute command")
    ap.add_argument("--tiles", action="store_true",
                    help="print each shape's entry for measured::kCublasTiles instead")
    args = ap.parse_args()
    out = csv.writer(sys.stdout, lineterminator="\n")
    if not args.tiles:
        out.writerow(["heads", "N", "d", "launch", "kernel", "grid", *METRICS])
    for d in args.d:
        for heads in args.heads:
            for n in args.n:
                rows = launches(args.lib, heads, n, d, args.ncu)
                if args.tiles:
                    try:
                        print(table_entry(heads, n, d, rows))
                    except ValueError as e:
                        sys.exit(f"naive_launches: {e}")
                else:
                    for i, r in enumerate(rows):
                        out.writerow([heads, n, d, i, r["kernel"], r["grid"],
                                      *(r.get(c, "") for c in METRICS)])
                sys.stdout.flush()


def table_entry(heads, n, d, rows):
    """The shape's line for measured::kCublasTiles (lessons/gpu_bridge/measured_h200.hpp) from
    its launches: the first nvjet launch is S = Q K^T's, the second O = P V's (a call of
    several heads' chunks repeats them; the first chunk's are the entry's)."""
    gemms = [r["kernel"] for r in rows if tile_of(r["kernel"])]
    if len(gemms) < 2:
        raise ValueError(f"heads {heads}, N {n}, d {d}: fewer than two nvjet launches in "
                         f"{[r['kernel'] for r in rows]}")
    (sr, sc), (orow, oc) = tile_of(gemms[0]), tile_of(gemms[1])
    names = ", ".join("_".join(g.split("_")[2:4]) for g in gemms[:2])
    return (f"    CublasTiles{{{n}, {d}, {heads}, {{{sr}, {sc}}}, {{{orow}, {oc}}}}},  "
            f"// {names}")

if __name__ == "__main__":
    main()
