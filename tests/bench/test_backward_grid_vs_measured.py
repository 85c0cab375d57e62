"""bench/simulator/backward_grid_vs_measured.py end to end on a results folder of its own: the
measured rows read by their column names (a file named "deterministic" holding that mode's),
each row's predictions asked of flashlab (the program's path is the first argument), measured
over predicted written out; and its refusals: no program, no rows, a bad count."""
import contextlib
import csv
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "simulator"))
import backward_grid_vs_measured as grid  # noqa: E402

FLASHLAB = None  # set from the command line

HEADER = ("pass,N,d,heads,kv_heads,batch,splits,causal,dtype,dram_read_predicted,"
          "dram_read_measured,dram_written_predicted,dram_written_measured")


def write(folder, name, rows):
    with open(os.path.join(folder, name), "w") as f:
        f.write(HEADER + "\n" + "\n".join(rows) + "\n")


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = grid.main(argv)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue()


class BackwardGridVsMeasured(unittest.TestCase):
    def test_rows_predicted_and_compared(self):
        with tempfile.TemporaryDirectory() as d:
            # Two small shapes that the L2 holds whole: the grid reads each tile once, as the
            # floor; "measured" is 5% more, so measured / grid is 1.05.
            write(d, "x-compare-pass-sweep-backward-causal.csv",
                  ["backward,1024,128,2,1,1,,1,bf16,0,2000000,0,0"])
            write(d, "x-compare-pass-sweep-backward-deterministic.csv",
                  ["backward,512,64,1,1,1,,0,bf16,0,1000000,0,0",
                   "backward,512,64,1,1,1,,0,bf16,0,,0,0"])  # not measured: left out
            write(d, "x-compare-pass-sweep-decode-b1.csv",
                  ["decode,512,64,1,1,1,1,0,bf16,0,1,0,0"])  # not the backward: left out
            out_csv = os.path.join(d, "out.csv")
            code, text = run(["--flashlab", FLASHLAB, "--results", d, "--csv", out_csv,
                              "--jobs", "1"])
            self.assertEqual(code, 0, text)
            with open(out_csv, newline="") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(r["mode"], r["N"]) for r in rows],
                             [("atomic", "1024"), ("deterministic", "512")])
            for r in rows:
                self.assertEqual(r["read_grid"], r["read_floor"])
                self.assertAlmostEqual(float(r["read_over_grid"]),
                                       float(r["read_measured"]) / float(r["read_grid"]))
            # 2 query heads over 1 KV head, N = 1024, d = 128, causal, from a cold L2: the
            # pre-kernel's O and dO, the main kernel's Q, K, V, dO, L, D and accumulator, the
            # post-kernel's accumulator.
            q, kv, f32 = 2 * 1024 * 128 * 2, 1024 * 128 * 2, 2 * 1024 * 4
            acc = 2 * 1024 * 128 * 4
            self.assertEqual(int(rows[0]["read_grid"]),
                             2 * q + (2 * q + 2 * kv + 2 * f32 + acc) + acc)
            self.assertIn("deterministic", text)

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            code, text = run(["--flashlab", os.path.join(d, "none"), "--results", d])
            self.assertEqual(code, 2)
            self.assertIn("no such program; build flashlab first", text)
            code, text = run(["--flashlab", FLASHLAB, "--results", d])
            self.assertEqual(code, 2)
            self.assertIn("no measured backward rows", text)
            code, text = run(["--flashlab", FLASHLAB, "--results", d, "--jobs", "0"])
            self.assertIn("take a positive count", text)
            code, text = run(["--flashlab", FLASHLAB, "--results", os.path.join(d, "missing")])
            self.assertIn("no such folder", text)


if __name__ == "__main__":
    FLASHLAB = sys.argv.pop(1)
    unittest.main()
