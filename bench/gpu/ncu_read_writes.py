"""What DRAM writes does Nsight Compute count for a kernel that writes nothing?

The passes' DRAM floor (`flashlab compare --pass ... --sweep`, docs/IO-LEVELS.md, "The passes
from a cold L2") predicts no DRAM writes for a decode whose few states fit the L2, yet Nsight
Compute counts 2.2 to 2.9 MiB written during every long decode. This program asks whether a
kernel that only reads (torch's sum of a buffer of X MiB) is charged writes too, and whose:

  dirty   the buffer was just written (torch.ones), so the L2 holds up to ~28 MiB of it dirty
          when the sum starts;
  clean   a read of another 512 MiB after the write has pushed those lines out first;
  copied  the buffer was just copied from the host (as flashlab compare uploads its inputs).

Each under `--cache-control all` (Nsight Compute's default, which flushes and invalidates the
caches before the kernel: what `flashlab compare` measures with) and `--cache-control none`.

  python3 bench/gpu/ncu_read_writes.py --csv reads.csv [--mib 16 64 256 1024]
  python3 bench/gpu/ncu_read_writes.py --csv reads.csv --fill randn --dtype bfloat16 \
      --cache-control all

runs itself under ncu once per cache control and writes one row per (cache control, state,
size): cache_control, state, mib, fill, dtype, dram_written_bytes, dram_read_bytes. The
buffer holds ones by default (as on 2026-12-04), or zeros or normal random numbers (--fill
randn, as the kernels' inputs), in float32 or bfloat16.
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

METRICS = "dram__bytes_write.sum,dram__bytes_read.sum"
FLUSH_MIB = 512  # the clean read that pushes dirty lines out: far more than any L2 holds
FLOATS_PER_MIB = (1 << 20) // 4
STATES = ("dirty", "clean", "copied")
CACHE_CONTROLS = ("all", "none")
FILLS = ("ones", "zeros", "randn")
DTYPES = ("float32", "bfloat16")


def filled(torch, fill, dtype, mib, device):
    """A buffer of `mib` MiB of `fill` in `dtype`, made on `device`."""
    n = mib * (1 << 20) // torch.tensor([], dtype=dtype).element_size()
    if fill == "randn":
        return torch.randn(n, dtype=dtype, device=device)
    return (torch.ones if fill == "ones" else torch.zeros)(n, dtype=dtype, device=device)


def run_kernels(sizes, fill, dtype_name):
    """Under ncu: for each size and state, the sum alone is profiled."""
    import torch  # only on the GPU machine

    dtype = getattr(torch, dtype_name)
    flush = torch.ones(FLUSH_MIB * FLOATS_PER_MIB, dtype=torch.float32, device="cuda")
    for mib in sizes:
        for state in STATES:
            if state == "copied":
                buf = filled(torch, fill, dtype, mib, "cpu").to("cuda")
            else:
                buf = filled(torch, fill, dtype, mib, "cuda")
            if state == "clean":
                flush.sum()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            buf.sum()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            del buf


def rows_of(lines, sizes, cache_control, fill="ones", dtype="float32"):
    """One row per profiled sum, in launch order: the states of each size."""
    launches = {}
    for row in ncu_csv.metric_rows(lines):
        launches.setdefault(row["ID"], {})[row["Metric Name"]] = row["Metric Value"]
    ordered = [launches[k] for k in sorted(launches, key=int)]
    if len(ordered) != len(STATES) * len(sizes):
        raise SystemExit(f"ncu profiled {len(ordered)} kernels, expected {len(STATES) * len(sizes)}")
    out = []
    for k, metrics in enumerate(ordered):
        mib, state = sizes[k // len(STATES)], STATES[k % len(STATES)]
        out.append({"cache_control": cache_control, "state": state, "mib": mib, "fill": fill,
                    "dtype": dtype, "dram_written_bytes": float(metrics["dram__bytes_write.sum"]),
                    "dram_read_bytes": float(metrics["dram__bytes_read.sum"])})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", required=True, help="where to write the rows")
    p.add_argument("--mib", type=int, nargs="+", default=[16, 64, 256, 1024],
                   help="buffer sizes in MiB (default: 16 64 256 1024)")
    p.add_argument("--fill", choices=FILLS, default="ones", help="what the buffer holds")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="the buffer's type")
    p.add_argument("--cache-control", choices=CACHE_CONTROLS, nargs="+", default=CACHE_CONTROLS,
                   help="Nsight Compute's cache controls to run under (default: both)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if any(m < 1 or m > 8192 for m in a.mib):
        p.error("--mib: sizes from 1 to 8192 MiB")
    if a.child:
        run_kernels(a.mib, a.fill, a.dtype)
        return
    rows = []
    for cache_control in a.cache_control:
        cmd = ["ncu", "--print-units", "base", "--csv", "--metrics", METRICS,
               "--profile-from-start", "off",
               "--cache-control", cache_control, sys.executable, os.path.abspath(__file__),
               "--csv", a.csv, "--child", "--mib", *map(str, a.mib), "--fill", a.fill,
               "--dtype", a.dtype]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"ncu failed ({out.returncode}): {out.stderr[-2000:]}")
        rows += rows_of(out.stdout.splitlines(), a.mib, cache_control, a.fill, a.dtype)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['cache_control']:>4} {r['fill']:>5} {r['dtype']:>8} {r['state']:>6} "
              f"{r['mib']:>5} MiB: written "
              f"{r['dram_written_bytes'] / 2**20:8.2f} MiB, read {r['dram_read_bytes'] / 2**20:9.2f} MiB")


if __name__ == "__main__":
    main()
