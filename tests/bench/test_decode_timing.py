"""bench/gpu/timing.py and the decode benchmark's printing, without torch or a GPU: the clean
flush writes do_bench's 256 MB and then reads another 256 MB before each timed call (the
dirty one only writes), a wait spins outside the timed events, the median of the events'
times is returned, decode_flush_wait.py refuses bad points and waits and
decode_read_ceiling.py bad points, and the decode table prints flashlab's and cuDNN's TB/s
after the clean flush beside do_bench's; the sweep times each (B, L) point once. Every script
of bench/gpu also compiles."""
import io
import os
import py_compile
import sys
import tempfile
import types
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.join(HERE, "..", "..", "bench", "gpu")
sys.path.insert(0, GPU)
import timing  # noqa: E402
import bench_decode as bd  # noqa: E402


class FakeTorch:
    """What CleanFlush uses of torch: two buffers and CUDA events on a clock the test sets."""

    def __init__(self, durations):
        self.log = []
        self.durations = list(durations)  # how long each timed call takes, in ms
        self.clock = 0.0
        fake = self

        class Buffer:
            def __init__(self, name):
                self.name = name

            def zero_(self):
                fake.log.append(("write", self.name))

            def sum(self):
                fake.log.append(("read", self.name))

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = fake.clock

            def elapsed_time(self, end):
                return end.at - self.at

        def sleep(cycles):  # the spin kernel: the clock runs `cycles` at 2000 a microsecond
            fake.log.append(("spin", cycles))
            fake.clock += cycles / 2000 / 1000

        self.int8 = "int8"
        self.cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None, _sleep=sleep)
        self.buffers = iter(["dirty", "clean"])
        self.Buffer = Buffer

    def empty(self, n, dtype, device):
        assert n == timing.FLUSH_BYTES and device == "cuda"
        return self.Buffer(next(self.buffers))

    zeros = empty

    def call(self):
        self.log.append(("call", None))
        self.clock += self.durations.pop(0)


class CleanFlush(unittest.TestCase):
    def test_clean_flush_writes_then_reads_before_each_call(self):
        torch = FakeTorch([3.0, 1.0, 2.0])
        flush = timing.CleanFlush(torch)
        self.assertEqual(flush.median_ms(torch.call, reps=3), 2.0)
        self.assertEqual(torch.log, [("write", "dirty"), ("read", "clean"), ("call", None)] * 3)

    def test_dirty_flush_only_writes(self):
        torch = FakeTorch([5.0, 4.0])
        flush = timing.CleanFlush(torch)
        self.assertEqual(flush.median_ms(torch.call, reps=2, clean=False), 4.5)
        self.assertEqual(torch.log, [("write", "dirty"), ("call", None)] * 2)


    def test_a_wait_spins_between_the_flush_and_the_timed_call(self):
        torch = FakeTorch([2.0, 2.0])
        flush = timing.CleanFlush(torch)
        # The spin kernel's rate, calibrated once: 2000 cycles a microsecond on the fake clock.
        self.assertAlmostEqual(flush.cycles_per_us(), 2000.0)
        torch.log.clear()
        # The wait is outside the events: the call's 2 ms alone is timed.
        self.assertEqual(flush.median_ms(torch.call, reps=2, clean=False, wait_us=20), 2.0)
        self.assertEqual(torch.log, [("write", "dirty"), ("spin", 40000), ("call", None)] * 2)
        torch.log.clear()
        flush.median_ms(lambda: None, reps=1, clean=True, wait_us=0)
        self.assertEqual(torch.log, [("write", "dirty"), ("read", "clean")])  # no spin at 0


class PointScripts(unittest.TestCase):
    """decode_flush_wait.py and decode_read_ceiling.py refuse bad points (and the first bad
    waits) before they need torch."""
    BAD_POINTS = [(["--points", "8x4096"], "give B:L pairs"),
                  (["--points", "8:0"], "positive integers"),
                  (["--points", "8:4096:2"], "give B:L pairs")]

    def run_script(self, script, *args):
        import subprocess
        return subprocess.run([sys.executable, os.path.join(GPU, script),
                               "libflashlab.so", *args], capture_output=True, text=True)

    def refused(self, script, cases):
        for args, message in cases:
            with self.subTest(script=script, args=args):
                r = self.run_script(script, *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)

    def test_flush_wait_refuses_bad_points_and_waits(self):
        self.refused("decode_flush_wait.py",
                     self.BAD_POINTS + [(["--waits", "-5"], "a wait is 0 us or more")])

    def test_read_ceiling_refuses_bad_points(self):
        self.refused("decode_read_ceiling.py", self.BAD_POINTS)


class DecodeTable(unittest.TestCase):
    def test_the_row_shows_do_bench_and_clean_figures(self):
        rows = {"flashlab": (0.0494, 2.71, 0.0, 4, 0.0396, 3.39),
                "cudnn": (0.0492, 2.73, 0.0, "", 0.0397, 3.38)}
        out = io.StringIO()
        with redirect_stdout(out):
            bd.print_row(8, 4096, rows)
        cells = out.getvalue().split()
        self.assertEqual(cells[:3], ["8", "4096", "4"])
        self.assertEqual([c for c in cells if c != "|"][3:],
                         ["2.71", "-", "-", "-", "-", "-", "2.73", "3.39", "-", "-", "3.38"])


class DecodePoints(unittest.TestCase):
    def test_the_default_sweep_has_every_length_and_batch_once(self):
        points = bd.decode_points(bd.LENGTHS, bd.BATCHES)
        self.assertEqual(points[:len(bd.LENGTHS)], [(8, L) for L in bd.LENGTHS])
        self.assertEqual(len(points), len(set(points)))
        self.assertEqual(len(points), len(bd.LENGTHS) + len(bd.BATCHES) - 1)  # B = 8 once

    def test_chosen_lengths_and_no_batch_sweep(self):
        self.assertEqual(bd.decode_points([4096, 131072], []), [(8, 4096), (8, 131072)])
        # B = 8 comes back in the batch sweep when its length was not among the lengths
        self.assertEqual(bd.decode_points([4096], [1, 8]),
                         [(8, 4096), (1, bd.BATCH_SWEEP_LEN), (8, bd.BATCH_SWEEP_LEN)])


class Scripts(unittest.TestCase):
    def test_every_script_compiles(self):
        with tempfile.TemporaryDirectory() as out:
            for name in sorted(os.listdir(GPU)):
                if name.endswith(".py"):
                    with self.subTest(script=name):
                        py_compile.compile(os.path.join(GPU, name), doraise=True,
                                           cfile=os.path.join(out, name + "c"))


if __name__ == "__main__":
    unittest.main()
