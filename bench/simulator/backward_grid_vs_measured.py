"""The backward's DRAM bytes, measured on the H200, beside the cold-L2 floor and the grid model.

Reads every bench/results/*-compare-pass-sweep-backward*.csv (Nsight Compute's dram__bytes_read
and _write summed over the pass's kernels, each from a cold L2, `flashlab compare --pass
backward --sweep`), asks `flashlab compare` again, without a GPU, for each row's predictions
(its `dram_read_grid` and `dram_written_grid`: the main kernel's grid, and the deterministic
mode's dQ kernel's, run through the L2's partitions as the H200 places its blocks; the floor for
the pre- and post-kernels), and prints one line a row with measured over predicted. A file whose
name says "deterministic" holds the deterministic mode's rows.

  python3 bench/simulator/backward_grid_vs_measured.py [--flashlab build/lessons/app/flashlab]
      [--results bench/results] [--csv out.csv] [--max-n 32768] [--jobs 2]

The grid runs every block's every tile through the model: about a minute at 16 heads and
N = 32,768, four at 65,536 (--max-n leaves the larger rows out).
"""
import argparse
import concurrent.futures
import csv
import os
import subprocess
import sys
import tempfile

KEY = ("N", "d", "heads", "kv_heads", "batch", "causal")


def measured_rows(results):
    """Every measured row of the backward's sweeps, with its file and mode."""
    rows = []
    for name in sorted(os.listdir(results)):
        if "-compare-pass-sweep-backward" not in name or not name.endswith(".csv"):
            continue
        with open(os.path.join(results, name), newline="") as f:
            for row in csv.DictReader(f):
                if not row.get("dram_read_measured"):
                    continue
                row["file"] = name
                row["deterministic"] = "deterministic" in name
                rows.append(row)
    return rows


def predict(flashlab, row):
    """The row's predictions from `flashlab compare --pass backward`, without a GPU."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "p.csv")
        cmd = [flashlab, "compare", "--pass", "backward", "--sweep", "n=" + row["N"], "--d",
               row["d"], "--heads", row["heads"], "--kv-heads", row["kv_heads"], "--batch",
               row["batch"], "--dtype", row["dtype"], "--no-ncu", "--large", "--csv", out]
        if row["causal"] == "1":
            cmd.append("--causal")
        if row["deterministic"]:
            cmd.append("--deterministic")
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(" ".join(cmd) + " failed:\n" + done.stdout + done.stderr)
        with open(out, newline="") as f:
            return next(csv.DictReader(f))


def ratio(measured, predicted):
    return float(measured) / float(predicted) if predicted and float(predicted) > 0 else None


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flashlab", default=os.path.join(root, "build/lessons/app/flashlab"))
    ap.add_argument("--results", default=os.path.join(root, "bench/results"))
    ap.add_argument("--csv", help="write the table here too")
    ap.add_argument("--max-n", type=int, default=1 << 22, help="leave out rows of larger N")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    if not os.access(a.flashlab, os.X_OK):
        ap.error(f"--flashlab {a.flashlab}: no such program; build flashlab first (make build)")
    if not os.path.isdir(a.results):
        ap.error(f"--results {a.results}: no such folder")
    if a.max_n < 1 or a.jobs < 1:
        ap.error("--max-n and --jobs take a positive count")
    rows = [r for r in measured_rows(a.results) if int(r["N"]) <= a.max_n]
    if not rows:
        ap.error(f"no measured backward rows of N <= {a.max_n} in {a.results}")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        predictions = list(pool.map(lambda r: predict(a.flashlab, r), rows))
    fields = ["file", "mode", *KEY, "read_measured", "read_floor", "read_grid", "read_over_floor",
              "read_over_grid", "written_measured", "written_floor", "written_grid",
              "written_over_grid"]
    table = []
    for r, p in zip(rows, predictions):
        table.append({
            "file": r["file"], "mode": "deterministic" if r["deterministic"] else "atomic",
            **{k: r[k] for k in KEY},
            "read_measured": r["dram_read_measured"], "read_floor": p["dram_read_predicted"],
            "read_grid": p["dram_read_grid"],
            "read_over_floor": ratio(r["dram_read_measured"], p["dram_read_predicted"]),
            "read_over_grid": ratio(r["dram_read_measured"], p["dram_read_grid"]),
            "written_measured": r["dram_written_measured"],
            "written_floor": p["dram_written_predicted"], "written_grid": p["dram_written_grid"],
            "written_over_grid": ratio(r["dram_written_measured"], p["dram_written_grid"]),
        })
    mib = lambda b: f"{float(b) / 2**20:9.1f}" if b else "        -"
    num = lambda x: f"{x:6.3f}" if x is not None else "     -"
    print("mode           N    d heads kv causal   read MiB: meas.    floor     grid  "
          "/floor  /grid   written MiB: meas.     grid  /grid")
    for t in table:
        print(f"{t['mode']:13} {t['N']:>6} {t['d']:>4} {t['heads']:>5} {t['kv_heads']:>2} "
              f"{t['causal']:>6}      {mib(t['read_measured'])} {mib(t['read_floor'])} "
              f"{mib(t['read_grid'])}  {num(t['read_over_floor'])} {num(t['read_over_grid'])}"
              f"           {mib(t['written_measured'])} {mib(t['written_grid'])} "
              f"{num(t['written_over_grid'])}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(table)
        print(f"wrote {len(table)} rows to {a.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
