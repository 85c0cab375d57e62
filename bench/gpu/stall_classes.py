"""Where a kernel's warps spend their time, by class of instruction: Nsight Compute's source
page (SASS with each instruction's executions and warp-state samples) summed over classes.

  ncu --section SourceCounters --page source --csv --print-source sass ... > source.csv
  python3 stall_classes.py source.csv [--top 10]

A warp-state sample is taken at a fixed interval on each SM: one warp, and the instruction it
is at, issued or not. So the samples at an instruction are roughly the warp time spent there;
the not-issued ones are the time a warp was ready to go on but could not (a dependency, a
full pipe, a barrier). Summed by class they say whether a kernel waits on its tensor cores,
its softmax, its barriers or its integer work, which instruction counts alone do not: a class
can execute many instructions and hold little of the time, if they issue beside the others.

The classes (CLASSES, the one list): an instruction's opcode is its first word without its
predicate and suffixes (`@!P0 BRA 0x...` is BRA, `HGMMA.64x128x16.F32.BF16` is HGMMA).
Branches hold the retries of mbarrier waits (the try-wait, then a branch back), so a warp
parked on a barrier is counted there more than at the SYNCS.
"""
import argparse
import csv
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_registers import PREDICATE  # noqa: E402  (SASS's `@P0 ` and the like)

CLASSES = {
    "tensor cores": ("HGMMA", "HMMA", "WARPGROUP"),
    "softmax arithmetic": ("FMNMX", "FADD", "FFMA", "FMUL", "MUFU", "F2FP", "FSEL", "FSETP",
                           "FCHK", "SHFL", "CS2R"),
    "barriers": ("SYNCS", "BAR", "WARPSYNC"),
    "branches": ("BRA", "BSSY", "BSYNC", "EXIT", "RET", "CALL", "NOP"),
    "memory": ("LDS", "STS", "LDSM", "STSM", "LDG", "STG", "LDC", "ULDC", "LDL", "STL",
               "UTMALDG", "UTMASTG", "UTMACMDFLUSH", "UBLKCP", "FENCE", "MEMBAR", "ATOMG",
               "RED", "LDGSTS", "LDGDEPBAR", "DEPBAR"),
}
OTHER = "integer, uniform and the rest"  # IMAD, ISETP, LEA, the U... datapath, MOV, ...
COLUMNS = {"source": "Source", "executed": "Instructions Executed",
           "samples": "Warp Stall Sampling (All Samples)",
           "not_issued": "Warp Stall Sampling (Not-issued Samples)"}


def opcode(source):
    """The opcode of one SASS line without its predicate and suffixes, or None for a line
    that is no instruction."""
    words = PREDICATE.sub("", source.strip()).split()
    op = words[0].split(".")[0] if words else ""
    return op if op[:1].isupper() else None


def class_of(op):
    for name, ops in CLASSES.items():
        if op in ops:
            return name
    return OTHER


def read_rows(path):
    """The instruction rows of the file's first kernel's source page: dicts of COLUMNS' keys.
    Nsight Compute's own lines (==PROF==, ==WARNING==) and the kernel-name line before the
    header are skipped, and a second kernel's page (its header again) ends the reading; a file
    without the columns is refused with what it lacks."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        lines = [line for line in f if not line.startswith("==")]
    reader = csv.reader(lines)
    header = None
    for row in reader:
        if COLUMNS["source"] in row and COLUMNS["executed"] in row:
            header = row
            break
    if header is None:
        raise ValueError(f"{path}: no header with '{COLUMNS['source']}' and "
                         f"'{COLUMNS['executed']}': give Nsight Compute's source page as CSV "
                         "(--page source --csv --print-source sass)")
    missing = [c for c in COLUMNS.values() if c not in header]
    if missing:
        raise ValueError(f"{path}: the source page lacks {', '.join(missing)}: collect it with "
                         "the SourceCounters section")
    index = {k: header.index(c) for k, c in COLUMNS.items()}
    rows = []
    for row in reader:
        if row == header:
            break  # the next kernel's page: only the first is read
        if len(row) < len(header):
            continue  # a kernel's name line, or a short line
        try:
            counts = {k: int(row[index[k]] or 0) for k in ("executed", "samples", "not_issued")}
        except ValueError:
            raise ValueError(f"{path}: a row whose counts are not whole numbers: {row[:6]}")
        rows.append({"source": row[index["source"]].strip(), **counts})
    if not rows:
        raise ValueError(f"{path}: the source page has no instruction rows")
    return rows


def by_class(rows):
    """{class: {"executed", "samples", "not_issued"}} over the rows, every class present."""
    totals = {name: {"executed": 0, "samples": 0, "not_issued": 0}
              for name in list(CLASSES) + [OTHER]}
    for r in rows:
        op = opcode(r["source"])
        if op is None:
            continue
        t = totals[class_of(op)]
        for k in t:
            t[k] += r[k]
    return totals


def share(part, whole):
    return part / whole if whole else 0.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source_csv", help="Nsight Compute's source page as CSV (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=0,
                    help="also list the N instructions with the most not-issued samples")
    args = ap.parse_args(argv)
    if args.top < 0:
        ap.error(f"--top {args.top}: give 0 or more instructions to list")
    try:
        rows = read_rows(args.source_csv)
    except (OSError, ValueError) as e:
        sys.exit(f"stall_classes.py: {e}")
    totals = by_class(rows)
    executed = sum(t["executed"] for t in totals.values())
    samples = sum(t["samples"] for t in totals.values())
    not_issued = sum(t["not_issued"] for t in totals.values())
    print(f"{'class':32s} {'executed':>10s} {'share':>6s} {'samples':>8s} {'share':>6s} "
          f"{'not issued':>10s} {'share':>6s}")
    for name, t in totals.items():
        print(f"{name:32s} {t['executed']:10d} {share(t['executed'], executed):6.1%} "
              f"{t['samples']:8d} {share(t['samples'], samples):6.1%} "
              f"{t['not_issued']:10d} {share(t['not_issued'], not_issued):6.1%}")
    print(f"{'all':32s} {executed:10d} {'':6s} {samples:8d} {'':6s} {not_issued:10d}")
    if args.top:
        print(f"\nthe {args.top} instructions with the most not-issued samples (line: source)")
        ranked = sorted(range(len(rows)), key=lambda i: -rows[i]["not_issued"])[:args.top]
        for i in sorted(ranked):
            r = rows[i]
            print(f"{i:6d} {r['not_issued']:6d} {r['executed']:10d}  {r['source'][:80]}")


if __name__ == "__main__":
    main()
