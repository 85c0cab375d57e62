"""The naive softmax's traffic under Nsight Compute: how many of its later passes over S come
from DRAM, case by case (bench/gpu/l2_rows_in_flight.cu says what each knob tests).

  python3 bench/gpu/l2_rows_in_flight.py --program build/bench/bench_l2_rows_in_flight \\
      --csv rows.csv --case 8:6144,8192,9216 --case 4:12288,16384 \\
      --case 8:9216,10240:no-p --case 8:9216,10240:lockstep

A case is BLOCKS_PER_SM:N,N,...[:no-p][:lockstep|:persistent][:side0|:side1]. side0 and
side1 run the blocks of one side of the L2 alone (the SMs of the other end at once), the
sides as bench_l2_partitions measured them (its --csv, given here as --partitions). Each case
runs the program once under ncu (the caches flushed before each launch, ncu's default), and
the CSV gets one row per launch: the program's own columns, then DRAM read and written, the
L2 slices' bytes, the time, and
    x = (DRAM read - S once) / ((passes - 1) S)
the share of the later passes that came from DRAM (0: all hit in the L2, 1: none did).
build/bench/simulator/naive_vs_measured --rows-in-flight rows.csv sets the mirror's x beside it.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
           "gpu__time_duration.sum"]
COLUMNS = ["dram_read", "dram_write", "lts_bytes", "time_ns"]
PROGRAM_FLAGS = ("no-p", "lockstep", "persistent")  # passed on as --no-p, ...
SIDE_FLAGS = ("side0", "side1")                      # the other side's SMs skipped


def parse_case(text):
    parts = text.split(":")
    if len(parts) < 2 or not parts[0].isdigit():
        raise argparse.ArgumentTypeError(
            f"case {text!r}: expected BLOCKS_PER_SM:N,N,...[:FLAG...], e.g. 8:6144,8192:no-p")
    flags = parts[2:]
    unknown = [f for f in flags if f not in PROGRAM_FLAGS + SIDE_FLAGS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"case {text!r}: unknown flag {unknown[0]!r} (the flags are "
            f"{', '.join(PROGRAM_FLAGS + SIDE_FLAGS)})")
    sizes = parts[1].split(",")
    if not all(s.isdigit() for s in sizes):
        raise argparse.ArgumentTypeError(f"case {text!r}: the sizes must be whole numbers")
    return {"per_sm": parts[0], "sizes": sizes, "flags": flags}


def ncu_rows(text):
    """Nsight Compute's CSV output as {launch id: {metric: value}}."""
    out = {}
    for row in ncu_csv.metric_rows(text.splitlines()):
        if row["Metric Name"] in METRICS:
            out.setdefault(int(row["ID"]), {})[row["Metric Name"]] = row["Metric Value"]
    return out


def side_sms(partitions_csv):
    """{side: [SM, ...]} from bench_l2_partitions' CSV (its rows of kind sm, reference 0)."""
    out = {}
    with open(partitions_csv) as f:
        for row in csv.DictReader(f):
            if row["kind"] == "sm" and row["reference"] == "0":
                out.setdefault(int(row["partition"]), []).append(row["sm"])
    if sorted(out) != [0, 1]:
        sys.exit(f"l2_rows_in_flight: {partitions_csv} does not split the SMs in two sides")
    return out


def run_case(program, case, rows, sides):
    with tempfile.TemporaryDirectory() as tmp:
        launches_csv = os.path.join(tmp, "launches.csv")
        cmd = ["ncu", "--print-units", "base", "--csv", "--metrics", ",".join(METRICS),
               "--kernel-name", "regex:rows_traffic", program, "--n", *case["sizes"],
               "--blocks-per-sm", case["per_sm"], "--rows", str(rows), "--csv", launches_csv]
        cmd += [f"--{flag}" for flag in case["flags"] if flag in PROGRAM_FLAGS]
        for side, flag in enumerate(SIDE_FLAGS):
            if flag in case["flags"]:
                if sides is None:
                    sys.exit("l2_rows_in_flight: a case of one side needs --partitions")
                cmd += ["--skip-sms", *sides[1 - side]]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"l2_rows_in_flight: {' '.join(cmd)} failed ({done.returncode}):\n"
                     f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        with open(launches_csv) as f:
            launches = list(csv.DictReader(f))
    measured = ncu_rows(done.stdout)
    if len(measured) != len(launches):
        sys.exit(f"l2_rows_in_flight: ncu profiled {len(measured)} launches of the "
                 f"{len(launches)} the program made:\n{done.stdout[-2000:]}")
    for launch, launch_id in zip(launches, sorted(measured)):
        for metric, column in zip(METRICS, COLUMNS):
            launch[column] = f"{measured[launch_id][metric]:.0f}"
        s = float(launch["s_bytes"])
        later = (int(launch["passes"]) - 1) * s
        launch["x"] = f"{(float(launch['dram_read']) - s) / later:.4f}"
    return launches


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", required=True, help="path to bench_l2_rows_in_flight")
    ap.add_argument("--csv", required=True, help="write one row per launch here")
    ap.add_argument("--case", type=parse_case, action="append", required=True,
                    help="BLOCKS_PER_SM:N,N,...[:no-p][:lockstep] (repeatable)")
    ap.add_argument("--rows", type=int, default=0, help="rows a launch (0: N, one head's S)")
    ap.add_argument("--partitions", help="bench_l2_partitions' --csv, for side0 and side1")
    args = ap.parse_args()
    sides = side_sms(args.partitions) if args.partitions else None
    rows = []
    for case in args.case:
        rows += run_case(args.program, case, args.rows, sides)
        for r in rows[-len(case["sizes"]):]:
            print(f"k={r['blocks_per_sm']} R={r['rows_in_flight']} N={r['n']:>6} P={r['write_p']}"
                  f" lockstep={r['lockstep']} rows={r['rows']}"
                  f"  DRAM read {float(r['dram_read']) / 2**20:9.1f} MiB  x={r['x']}"
                  f"  {float(r['time_ns']) / 1e3:9.1f} us", flush=True)
        with open(args.csv, "w", newline="") as f:  # after each case: a later failure keeps it
            writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
