"""Nsight Compute's --csv output, read: its rows are the lines that start with a quote (the
profiled program's own output between them is left out), one a metric of a kernel launch."""
import csv


def metric_rows(lines):
    """Each metric row of ncu's --csv lines as a dict of its columns ("ID", "Kernel Name",
    "Metric Name", ...), with "Metric Value" as a number."""
    for row in csv.DictReader(line for line in lines if line.startswith('"')):
        row["Metric Value"] = float(row["Metric Value"].replace(",", ""))
        yield row
