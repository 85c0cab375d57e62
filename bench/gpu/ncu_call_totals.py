"""One row per call from Nsight Compute's CSV lines of several calls, each line prefixed with
the call's shape (what the loop that ran them wrote before ncu's quoted fields): DRAM bytes
read and written and time summed over the call's kernels, and the naive softmax's own DRAM
read with x = (its read - S) / 2S, the share of its later passes over S that came from DRAM
(empty for another --kernel).

  python3 bench/gpu/ncu_call_totals.py --columns heads,N,d,mask --kernel naive \\
      raw.csv > calls.csv
  python3 bench/gpu/ncu_call_totals.py --columns heads,N --kernel fa2 raw.csv > fa2.csv

Rows of ncu's header (its "ID" line) are skipped. A causal call's S is the scores its rows see,
N(N + 1) / 2 a head.
"""
import argparse
import collections
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_csv  # noqa: E402

# The naive softmax's S and its passes (gpu/include/flashlab/gpu/kernel_info.hpp, naive::):
SCORE_BYTES = 4   # S in fp32
LATER_PASSES = 2  # kSoftmaxPasses = 3: the passes after the first, which the L2 may serve


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", help="the prefixed ncu lines")
    ap.add_argument("--columns", default="heads,N",
                    help="the prefix's columns, comma-separated (heads and N required; d and "
                         "mask where the calls vary them)")
    ap.add_argument("--kernel", default="naive", help="the kernel column's value")
    args = ap.parse_args()
    names = args.columns.split(",")
    if "heads" not in names or "N" not in names:
        sys.exit("ncu_call_totals: --columns must name heads and N")
    # Each call's lines (its own ncu header among them), by its prefix, in the order run.
    lines_of = collections.OrderedDict()
    with open(args.raw) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", len(names))
            if len(parts) > len(names):
                lines_of.setdefault(tuple(parts[:-1]), []).append(parts[-1])
    out = csv.writer(sys.stdout, lineterminator="\n")
    extra = [n for n in names if n not in ("heads", "N", "d", "mask")]
    out.writerow(["kernel", "heads", "N", "d", "causal", *extra, "launches", "dram_read_measured",
                  "dram_written_measured", "softmax_dram_read", "softmax_x", "time_ns"])
    for shape, lines in lines_of.items():
        total = collections.Counter()
        launches = set()
        for row in ncu_csv.metric_rows(lines):
            launches.add(row["ID"])
            total[row["Metric Name"]] += row["Metric Value"]
            if "softmax_rows" in row["Kernel Name"]:
                total["softmax " + row["Metric Name"]] += row["Metric Value"]
        call = dict(zip(names, shape))
        n, heads = int(call["N"]), int(call["heads"])
        causal = call.get("mask", "none") == "causal"
        scores = n * (n + 1) / 2 if causal else n * n
        s = SCORE_BYTES * scores * heads
        softmax_read = total["softmax dram__bytes_read.sum"]
        softmax = [int(softmax_read), f"{(softmax_read - s) / (LATER_PASSES * s):.4f}"]
        if args.kernel != "naive":  # no softmax kernel of its own: left empty
            softmax = ["", ""]
        out.writerow([args.kernel, heads, n, call.get("d", "128"), 1 if causal else 0,
                      *[call[e] for e in extra], len(launches),
                      int(total["dram__bytes_read.sum"]), int(total["dram__bytes_write.sum"]),
                      *softmax, int(total["gpu__time_duration.sum"])])


if __name__ == "__main__":
    main()
