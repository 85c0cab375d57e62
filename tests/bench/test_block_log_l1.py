"""bench/gpu/block_log_l1.py without a GPU: the replay of a block log through an LRU L1 per
SM, on logs written by hand. Two blocks of one head on one SM in step read each K and V tile
across once; on two SMs, or one after the other, twice; an L1 of 0 bytes serves nothing; the
measured bytes are matched to the logged calls past each N's warm-up launch."""
import csv
import gzip
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import block_log_l1 as bl  # noqa: E402

N = 128  # 4 KV steps of 32 keys
STEPS = N // bl.BC


def block(b, head, sm, start, end):
    return (b, head, 0, sm, start, end)


class Replay(unittest.TestCase):
    def test_two_blocks_of_a_head_in_step_on_one_sm_share_every_tile(self):
        blocks = [block(0, 0, 5, 0, 1000), block(1, 0, 5, 1, 1001)]
        self.assertEqual(bl.replay(blocks, N, 28 * 1024),
                         2 * bl.Q_BYTES + STEPS * 2 * bl.TILE)
        self.assertEqual(bl.sharing(blocks), 2)

    def test_on_two_sms_or_one_after_the_other_nothing_is_shared(self):
        apart = [block(0, 0, 5, 0, 1000), block(1, 0, 6, 0, 1000)]
        after = [block(0, 0, 5, 0, 1000), block(1, 0, 5, 1000, 2000)]
        other_head = [block(0, 0, 5, 0, 1000), block(1, 1, 5, 0, 1000)]
        every_tile_twice = 2 * bl.Q_BYTES + 2 * STEPS * 2 * bl.TILE
        for blocks in (apart, other_head):
            self.assertEqual(bl.replay(blocks, N, 28 * 1024), every_tile_twice)
            self.assertEqual(bl.sharing(blocks), 0)
        # One after the other: the L1 holds the first block's last 3 tiles (28 KiB / 8 KiB:
        # V_2, K_3, V_3), and the second block's loads of steps 0 and 1 push them out before it
        # reaches them.
        self.assertEqual(bl.sharing(after), 0)
        self.assertEqual(bl.replay(after, N, 28 * 1024), every_tile_twice)

    def test_an_l1_of_nothing_serves_nothing(self):
        blocks = [block(0, 0, 5, 0, 1000), block(1, 0, 5, 1, 1001)]
        self.assertEqual(bl.replay(blocks, N, 0), 2 * bl.Q_BYTES + 2 * STEPS * 2 * bl.TILE)


class MeasuredBytes(unittest.TestCase):
    def test_the_calls_follow_each_warm_up(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bytes.csv")
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["launch", "kernel", "grid", "metric", "value"])
                for launch, value in enumerate([10, 11, 12, 20, 21, 22]):
                    w.writerow([launch, "k", "g", bl.METRIC, value])
                    w.writerow([launch, "k", "g", "gpu__time_duration.sum", 1])
            keys = [(64, 0), (64, 1), (128, 0), (128, 1)]
            self.assertEqual(bl.load_bytes(path, keys),
                             {(64, 0): 11, (64, 1): 12, (128, 0): 21, (128, 1): 22})
            with self.assertRaises(SystemExit):
                bl.load_bytes(path, keys[:3])

    def test_a_log_round_trips(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "log.csv.gz")
            with gzip.open(path, "wt", newline="") as f:
                w = csv.writer(f)
                w.writerow(["N", "call", "block", "head", "tile", "sm", "start_ns", "end_ns"])
                w.writerow([N, 0, 1, 0, 1, 7, 5, 9])
                w.writerow([N, 0, 0, 0, 0, 3, 0, 9])
            self.assertEqual(bl.load_log(path), {(N, 0): [(0, 0, 0, 3, 0, 9), (1, 0, 1, 7, 5, 9)]})


if __name__ == "__main__":
    unittest.main()
