"""One row per call from Nsight Compute's CSV lines of several calls, each line prefixed with
the call's shape (what the loop that ran them wrote before ncu's quoted fields): DRAM bytes
read and written and time summed over the call's kernels, and the naive softmax's own DRAM
read with x = (its read - S) / 2S, the share of its later passes over S that came from DRAM.

  python3 bench/gpu/ncu_call_totals.py --columns heads,N,d,mask --kernel naive \\
      raw.csv > calls.csv

Rows of ncu's header (its "ID" line) are skipped. A causal call's S is the scores its rows see,
N(N + 1) / 2 a head.
"""
import argparse
import collections
import csv
import sys


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
    calls = collections.OrderedDict()
    with open(args.raw) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", len(names))
            if len(parts) <= len(names) or parts[-1].startswith('"ID"'):
                continue
            shape = tuple(parts[:len(names)])
            fields = next(csv.reader([parts[-1]]))
            kernel_id, name, metric = fields[0], fields[4], fields[12]
            value = float(fields[14].replace(",", ""))
            c = calls.setdefault(shape, {"read": 0.0, "write": 0.0, "time": 0.0,
                                         "softmax_read": 0.0, "kernels": set()})
            c["kernels"].add(kernel_id)
            if metric == "dram__bytes_read.sum":
                c["read"] += value
                if "softmax_rows" in name:
                    c["softmax_read"] += value
            elif metric == "dram__bytes_write.sum":
                c["write"] += value
            elif metric == "gpu__time_duration.sum":
                c["time"] += value
    out = csv.writer(sys.stdout, lineterminator="\n")
    extra = [n for n in names if n not in ("heads", "N", "d", "mask")]
    out.writerow(["kernel", "heads", "N", "d", "causal", *extra, "launches", "dram_read_measured",
                  "dram_written_measured", "softmax_dram_read", "softmax_x", "time_ns"])
    for shape, c in calls.items():
        row = dict(zip(names, shape))
        n, heads = int(row["N"]), int(row["heads"])
        causal = row.get("mask", "none") == "causal"
        scores = n * (n + 1) / 2 if causal else n * n
        s = 4.0 * scores * heads
        x = (c["softmax_read"] - s) / (2 * s)
        out.writerow([args.kernel, heads, n, row.get("d", "128"), 1 if causal else 0,
                      *[row[e] for e in extra], len(c["kernels"]), int(c["read"]),
                      int(c["write"]), int(c["softmax_read"]), f"{x:.4f}", int(c["time"])])


if __name__ == "__main__":
    main()
