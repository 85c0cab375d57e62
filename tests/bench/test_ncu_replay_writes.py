"""bench/gpu/ncu_replay_writes.py: compare's counters read from the program's own output (the
one list of them), ncu's lines read into a row per kernel launch, and its refusals."""
import contextlib
import io
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import ncu_replay_writes  # noqa: E402

FLASHLAB = sys.argv.pop(1) if len(sys.argv) > 1 else None
HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


class ReplayWrites(unittest.TestCase):
    def test_compare_metrics_from_the_program(self):
        out = subprocess.run([FLASHLAB, "compare", "--sweep", "n=64", "--kernels", "fa2",
                              "--no-ncu", "--no-color"], capture_output=True, text=True,
                             check=True)
        metrics = ncu_replay_writes.compare_metrics(out.stdout.splitlines())
        self.assertEqual(len(metrics), len(set(metrics)))
        self.assertGreater(len(metrics), len(ncu_replay_writes.DRAM_METRICS))
        for m in ncu_replay_writes.DRAM_METRICS + ["l1tex__m_xbar2l1tex_read_bytes.sum"]:
            self.assertIn(m, metrics)

    def test_no_counters_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            ncu_replay_writes.compare_metrics(["The counters:", "nothing here"])
        self.assertIn("could not read compare's counters", str(e.exception))

    def test_a_row_per_launch_in_order(self):
        lines = [HEADER, "the program's own line",
                 '"1","void fa3_backward_kernel<__nv_bfloat16, 128>(X)","dram__bytes_write.sum","byte","2,048"',
                 '"1","void fa3_backward_kernel<__nv_bfloat16, 128>(X)","dram__bytes_read.sum","byte","4096"',
                 '"0","void preprocess_kernel<__nv_bfloat16>(Y)","dram__bytes_write.sum","byte","7"',
                 '"0","void preprocess_kernel<__nv_bfloat16>(Y)","dram__bytes_read.sum","byte","9"']
        rows = ncu_replay_writes.rows_of(lines, "backward-h16-4k", "two", "kernel")
        self.assertEqual([r["kernel"] for r in rows], ["preprocess_kernel", "fa3_backward_kernel"])
        self.assertEqual(rows[1]["dram_written_bytes"], 2048)
        self.assertEqual(rows[0]["dram_read_bytes"], 9)
        self.assertEqual({(r["case"], r["metrics"], r["replay"]) for r in rows},
                         {("backward-h16-4k", "two", "kernel")})

    def test_no_kernel_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            ncu_replay_writes.rows_of([HEADER], "decode-b1-32k", "compare", "application")
        self.assertIn("ncu profiled no kernel for decode-b1-32k", str(e.exception))

    def test_an_unknown_case_is_refused(self):
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
            ncu_replay_writes.main(["--flashlab", "x", "--csv", "unused.csv", "--cases", "forward"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--cases: forward unknown; choose from decode-b1-32k", err.getvalue())


if __name__ == "__main__":
    unittest.main()
