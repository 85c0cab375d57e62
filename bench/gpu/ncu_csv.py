"""Nsight Compute as the device scripts run it: how DRAM bytes are measured (the replay mode,
a first read of their own that their rows leave out, the profiled range) and its --csv output,
read: its rows are the lines that start with a quote (the profiled program's own output between
them is left out), one a metric of a kernel launch."""
import csv

# How the device scripts run Nsight Compute where DRAM bytes are read (docs/IO-LEVELS.md,
# "Nsight Compute's first kernel, and its kernel replay"). The first kernel Nsight Compute
# profiles in a process is charged about 2.3 MiB of DRAM writes that are not its own where it
# reads more than the L2 holds; in kernel replay, Nsight Compute's default, every such kernel
# is charged as much again. In application replay the whole program runs once a pass, and a
# first read of its own (FIRST_READ_MIB, left out) takes them in each run. The same as
# `flashlab compare`'s (kNcuReplayMode, lessons/gpu_bridge/ncu_bytes.hpp); a test checks that
# the two agree.
REPLAY_MODE = "application"
REPLAY = ["--replay-mode", REPLAY_MODE]
# The first read: more than twice the L2 of any GPU the scripts run on (the H200's 60 MiB).
FIRST_READ_MIB = 256
# The name of that read's kernel, as Nsight Compute prints it (torch's reduction).
FIRST_READ_KERNEL = "reduce_kernel"


def first_read(torch):
    """The read to run first in a profiled range and leave out of its sums, which takes the
    writes Nsight Compute charges the first profiled kernel of a process: its buffer of
    FIRST_READ_MIB MiB is made now, outside the range; call what this returns inside it."""
    floats = FIRST_READ_MIB * 2**20 // 4  # 4-byte floats
    buf = torch.ones(floats, dtype=torch.float32, device="cuda")
    return lambda: buf.sum()


def profile_call(torch, call, first_read_too=False):
    """Runs call() once between cudaProfilerStart and Stop, the range `ncu
    --profile-from-start off` measures; with first_read_too, after the first read (first_read)."""
    read_first = first_read(torch) if first_read_too else None
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    if read_first:
        read_first()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def is_first_read(kernel_name):
    """Whether a launch of this name is the first read's."""
    return FIRST_READ_KERNEL in kernel_name


def without_first_read(rows):
    """Rows of a profiled range's launches, in launch order (dicts with a "kernel"), less the
    first read's, which must come first. Raises ValueError when it does not."""
    if not rows or not is_first_read(rows[0]["kernel"]):
        first = rows[0]["kernel"] if rows else "nothing"
        raise ValueError(f"the profiled range should start with the first read "
                         f"({FIRST_READ_KERNEL}), not {first}")
    return rows[1:]


def metric_rows_without_first_read(rows):
    """Nsight Compute's metric rows (metric_rows) less those of the first launch where it is
    the first read's: a range profiled with or without one (bench.py --summarize-ncu)."""
    rows = list(rows)
    if rows and is_first_read(rows[0]["Kernel Name"]):
        rows = [r for r in rows if r["ID"] != rows[0]["ID"]]
    return rows


def metric_rows(lines):
    """Each metric row of ncu's --csv lines as a dict of its columns ("ID", "Kernel Name",
    "Metric Name", ...), with "Metric Value" as a number."""
    for row in csv.DictReader(line for line in lines if line.startswith('"')):
        row["Metric Value"] = float(row["Metric Value"].replace(",", ""))
        yield row
