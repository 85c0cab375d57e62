"""Are some of the DRAM writes Nsight Compute counts for a pass its own?

`flashlab compare` asks Nsight Compute for nine metrics (the program lists them: "The
counters"), more than one replay pass of each kernel collects. Before each later pass, kernel
replay restores the memory the kernel writes (decode's states and O; the backward's dQ
accumulator, dK, dV and dQ). Where those restored lines are still dirty in the L2 when the
pass that counts DRAM runs, the kernel's reads push them out and they are counted as its
writes: a fixed amount, at most what the L2 holds dirty. That would explain two things the
simulator's mirrors do not predict (docs/IO-LEVELS.md): the 2.3 MiB every long decode writes,
and the 4 to 12 MiB the backward writes beyond the grid model's figure whatever its size.

This program profiles the same calls with the two DRAM metrics alone (one pass: nothing is
restored) and with compare's nine, each in kernel replay and in application replay (the whole
program run again for each pass: nothing restored either), and writes one row per (case,
metrics, replay, kernel):

  python3 bench/gpu/ncu_replay_writes.py --flashlab build/lessons/app/flashlab \\
      --csv replay_writes.csv [--cases decode-b1-32k backward-h16-4k]

If the reading holds, the nine metrics in kernel replay write more than the two, by about 2.3
MiB for the decode and 9 MiB for the backward, and application replay writes no more than one
pass does.
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

DRAM_METRICS = ["dram__bytes_write.sum", "dram__bytes_read.sum"]
REPLAY_MODES = ("kernel", "application")

# The calls, as compare's hidden --gpu-only mode runs them (one pass, nothing printed).
CASES = {
    "decode-b1-32k": ["--pass", "decode", "--gpu-only", "decode", "--n", "32768", "--n-q", "1",
                      "--d", "128", "--heads", "32", "--kv-heads", "8", "--batch", "1"],
    "decode-b8-4k": ["--pass", "decode", "--gpu-only", "decode", "--n", "4096", "--n-q", "1",
                     "--d", "128", "--heads", "32", "--kv-heads", "8", "--batch", "8"],
    "backward-h16-4k": ["--pass", "backward", "--gpu-only", "backward", "--n", "4096", "--d",
                        "128", "--heads", "16", "--causal"],
    "backward-h16-16k": ["--pass", "backward", "--gpu-only", "backward", "--n", "16384", "--d",
                         "128", "--heads", "16", "--causal"],
}


def compare_metrics(lines):
    """The metrics `flashlab compare` measures with: the lines under "The counters:" of its
    output, each "  level: metric"."""
    metrics, reading = [], False
    for line in lines:
        if line.rstrip().endswith("The counters:"):
            reading = True
        elif reading and line.startswith("  ") and ": " in line:
            metrics.append(line.rsplit(": ", 1)[1].strip())
        elif reading:
            break
    if not metrics or not all(m.endswith(".sum") for m in metrics):
        raise SystemExit(f"could not read compare's counters from its output (got {metrics})")
    return metrics


def rows_of(lines, case, metrics_name, replay):
    """One row per kernel launch of ncu's --csv lines: its DRAM bytes written and read."""
    launches = {}
    for row in ncu_csv.metric_rows(lines):
        k = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"].split("<")[0]})
        k[row["Metric Name"]] = row["Metric Value"]
    if not launches:
        raise SystemExit(f"ncu profiled no kernel for {case} ({metrics_name} metrics, {replay} "
                         "replay)")
    out = []
    for key in sorted(launches, key=int):
        k = launches[key]
        out.append({"case": case, "metrics": metrics_name, "replay": replay,
                    "kernel": k["kernel"].replace("void ", "").strip(),
                    "dram_written_bytes": k.get("dram__bytes_write.sum", float("nan")),
                    "dram_read_bytes": k.get("dram__bytes_read.sum", float("nan"))})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flashlab", required=True, help="the flashlab program")
    p.add_argument("--csv", required=True, help="where to write the rows")
    p.add_argument("--cases", nargs="+", default=["decode-b1-32k", "backward-h16-4k"],
                   help=f"which calls (of {', '.join(CASES)})")
    a = p.parse_args(argv)
    unknown = [c for c in a.cases if c not in CASES]
    if unknown:
        p.error(f"--cases: {', '.join(unknown)} unknown; choose from {', '.join(CASES)}")
    listed = subprocess.run([a.flashlab, "compare", "--sweep", "n=64", "--kernels", "fa2",
                             "--no-ncu", "--no-color"], capture_output=True, text=True, check=False)
    metric_sets = {"two": DRAM_METRICS, "compare": compare_metrics(listed.stdout.splitlines())}
    rows = []
    for case in a.cases:
        for name, metrics in metric_sets.items():
            for replay in REPLAY_MODES:
                cmd = ["ncu", "--csv", "--print-units", "base", "--clock-control", "none",
                       "--replay-mode", replay, "--metrics", ",".join(metrics), a.flashlab,
                       "compare", *CASES[case]]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"ncu failed ({out.returncode}) on {case}: "
                                     f"{(out.stdout + out.stderr)[-2000:]}")
                for r in rows_of(out.stdout.splitlines(), case, name, replay):
                    rows.append(r)
                    print(f"{case:>17} {name:>7} {replay:>11} {r['kernel'][:40]:>40}: written "
                          f"{r['dram_written_bytes'] / 2**20:8.2f} MiB, read "
                          f"{r['dram_read_bytes'] / 2**20:9.2f} MiB", flush=True)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
