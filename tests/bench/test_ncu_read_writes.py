"""bench/gpu/ncu_read_writes.py's reading of Nsight Compute's lines: a sum per state and size in
launch order, the bytes as numbers, the program's own output between the lines left out; a
count of kernels that does not match refused, and sizes out of range refused before ncu runs."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import ncu_read_writes  # noqa: E402

HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def lines(launches):
    out = [HEADER, "a line the program printed"]
    for i, (written, read) in enumerate(launches):
        out += [f'"{i}","k","dram__bytes_write.sum","byte","{written:,}"',
                f'"{i}","k","dram__bytes_read.sum","byte","{read}"']
    return out


class ReadWrites(unittest.TestCase):
    def test_rows_in_launch_order(self):
        launches = [(k * 1000, 16 * 2**20 + k) for k in range(6)]
        rows = ncu_read_writes.rows_of(lines(launches), [16, 64], "all")
        self.assertEqual([(r["mib"], r["state"]) for r in rows],
                         [(16, "dirty"), (16, "clean"), (16, "copied"),
                          (64, "dirty"), (64, "clean"), (64, "copied")])
        self.assertTrue(all(r["cache_control"] == "all" for r in rows))
        self.assertEqual(rows[4]["dram_written_bytes"], 4000)
        self.assertEqual(rows[5]["dram_read_bytes"], 16 * 2**20 + 5)
        self.assertTrue(all((r["fill"], r["dtype"]) == ("ones", "float32") for r in rows))

    def test_rows_carry_the_fill_and_dtype(self):
        rows = ncu_read_writes.rows_of(lines([(0, 1)] * 3), [128], "all", "randn", "bfloat16")
        self.assertTrue(all((r["fill"], r["dtype"]) == ("randn", "bfloat16") for r in rows))

    def test_a_missing_kernel_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            ncu_read_writes.rows_of(lines([(1, 2)] * 5), [16, 64], "none")
        self.assertIn("profiled 5 kernels, expected 6", str(e.exception))

    def test_sizes_out_of_range_are_refused(self):
        for bad in ("0", "8193"):
            err = io.StringIO()
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
                ncu_read_writes.main(["--csv", "unused.csv", "--mib", "16", bad])
            self.assertEqual(e.exception.code, 2)
            self.assertIn("--mib: sizes from 1 to 8192 MiB", err.getvalue())


if __name__ == "__main__":
    unittest.main()
