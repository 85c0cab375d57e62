"""bench/gpu/step_log_stats.py on a block log and step log worked by hand: the front's rows
(steps by time since the head's first reader began them), blocks of one head on one SM in
step, behind and ahead, the even pace, a step log read compressed, and the refusals."""
import csv
import io
import lzma
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import step_log_stats  # noqa: E402

US = 1000  # the logs are in ns
# block: (KV head, SM, step starts in us, end in us). Blocks 0 and 1 share SM 0 and head 0,
# block 1 a microsecond behind; block 3 shares SM 0 with them but not the head; blocks 2 and 4
# share SM 1 and head 0, block 4 two steps and a fifth behind.
BLOCKS = {
    0: (0, 0, [0, 100, 200, 300, 400], 500),
    1: (0, 0, [1, 101, 201, 301, 401], 501),
    2: (0, 1, [20, 130, 215, 330, 430], 530),
    3: (1, 0, [5, 105, 205], 305),
    4: (0, 1, [250, 350], 450),
}


def write_logs(folder, compress_steps):
    log = os.path.join(folder, "x-scalar-block-log.csv")
    with open(log, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["N", "d", "dtype", "heads", "call", "block", "head", "tile", "sm",
                    "start_ns", "end_ns", "causal"])
        for b, (head, sm, starts, end) in BLOCKS.items():
            w.writerow([64, 128, "bf16", 2, 0, b, head, b, sm, starts[0] * US, end * US, 1])
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["N", "heads", "causal", "call", "block", "step", "start_ns"])
    for b, (_, _, starts, _) in BLOCKS.items():
        for j, t in enumerate(starts):
            w.writerow([64, 2, 1, 0, b, j, t * US])
    steps = log[:-len(".csv")] + "-steps.csv"
    if compress_steps:
        with lzma.open(steps + ".xz", "wt") as f:
            f.write(text.getvalue())
    else:
        with open(steps, "w") as f:
            f.write(text.getvalue())
    return log


class StepLogStats(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = write_logs(self.dir.name, compress_steps=True)

    def tearDown(self):
        self.dir.cleanup()

    def test_front_rows_by_time_since_the_heads_first_reader(self):
        blocks, steps = step_log_stats.load(self.log, 64, 1, 0)
        # Steps 1 and 2 of blocks 0, 1, 2 (blocks 3 and 4 are too short to have any but
        # their first and last two). Step 1: head 0's first reader began it at 100 us; blocks
        # 0 and 1 at 0 and 1 us after (100 us each), block 2 at 30 us after (85 us). Step 2:
        # first at 200; blocks 0 and 1 at 0 and 1 us (100 us), block 2 at 15 us (115 us).
        self.assertEqual(step_log_stats.front(blocks, steps),
                         [(0, 2, 4, 100.0), (12, 16, 1, 115.0), (16, 32, 1, 85.0)])

    def test_blocks_of_one_head_on_one_sm(self):
        blocks, steps = step_log_stats.load(self.log, 64, 1, 0)
        # SM 0: each of block 0's starts from 100 us on finds block 1 0.01 of a step behind
        # (4 moments), each of block 1's finds block 0 0.01 ahead (5): 9 in step; block 3 is
        # another head's. SM 1: block 4 at 250 and 350 us finds block 2 2.30 and 2.20 steps
        # ahead; block 2 at 330 and 430 us finds block 4 2.2 steps behind.
        total, in_step, behind, ahead = step_log_stats.pairs(blocks, steps)
        self.assertEqual(total, 13)
        self.assertAlmostEqual(in_step, 9 / 13)
        self.assertAlmostEqual(behind, 2 / 13)
        self.assertAlmostEqual(ahead, 2 / 13)

    def test_even_pace_spreads_steps_over_start_and_end(self):
        blocks, steps = step_log_stats.load(self.log, 64, 1, 0)
        even = step_log_stats.even_pace(blocks, steps)
        self.assertEqual(even[2], [20 * US, 122 * US, 224 * US, 326 * US, 428 * US])
        self.assertEqual(even[0], steps[0])

    def test_main_prints_both_tables_from_plain_files(self):
        plain = tempfile.TemporaryDirectory()
        self.addCleanup(plain.cleanup)
        log = write_logs(plain.name, compress_steps=False)
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(step_log_stats.main(["--log", log, "--n", "64", "--causal", "1"]), 0)
        text = out.getvalue()
        self.assertIn("5 blocks, 20 steps (N = 64, causal = 1, call 0)", text)
        self.assertIn("| 0 to 2 | 4 | 100.0 |", text)
        self.assertIn("| as logged | 13 | 0.692 | 0.154 | 0.154 |", text)

    def test_refusals(self):
        with self.assertRaisesRegex(SystemExit, "no call 0 at N = 128 with causal = 1"):
            step_log_stats.load(self.log, 128, 1, 0)
        with self.assertRaisesRegex(SystemExit, r"no .*nope\.csv \(nor .*nope\.csv\.xz\)"):
            step_log_stats.load(os.path.join(self.dir.name, "nope.csv"), 64, 1, 0)
        # A step log without block 4's steps.
        steps = self.log[:-len(".csv")] + "-steps.csv.xz"
        with lzma.open(steps, "rt") as f:
            rows = [r for r in f.read().splitlines() if not r.startswith("64,2,1,0,4,")]
        with lzma.open(steps, "wt") as f:
            f.write("\n".join(rows) + "\n")
        with self.assertRaisesRegex(SystemExit, "block 4 has no steps"):
            step_log_stats.load(self.log, 64, 1, 0)


if __name__ == "__main__":
    unittest.main()
