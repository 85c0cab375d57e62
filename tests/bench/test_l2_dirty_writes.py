"""bench/gpu/l2_dirty_writes.py's reading of Nsight Compute's lines: a fill and a read per size in
launch order, the bytes as integers, the program's own output between the lines left out, and
a count of kernels that does not match the sizes refused."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import l2_dirty_writes  # noqa: E402

HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def lines(launches):
    out = [HEADER, "a line the program printed"]
    for i, (written, read, ns) in enumerate(launches):
        out += [f'"{i}","k","dram__bytes_write.sum","byte","{written:,}"',
                f'"{i}","k","dram__bytes_read.sum","byte","{read}"',
                f'"{i}","k","gpu__time_duration.sum","ns","{ns}"']
    return out


class DirtyWrites(unittest.TestCase):
    def test_rows_in_launch_order(self):
        rows = l2_dirty_writes.table(lines([(1000, 5, 70), (0, 4194304, 80), (2048, 6, 90),
                                            (123456, 8388608, 100)]), [4, 8])
        self.assertEqual([(r["mib"], r["kernel"]) for r in rows],
                         [(4, "fill"), (4, "read_after"), (8, "fill"), (8, "read_after")])
        self.assertEqual(rows[0]["dram_written_bytes"], 1000)
        self.assertEqual(rows[3]["dram_written_bytes"], 123456)
        self.assertEqual(rows[1]["dram_read_bytes"], 4194304)
        self.assertEqual(rows[2]["time_ns"], 90)

    def test_a_missing_kernel_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            l2_dirty_writes.table(lines([(1, 2, 3)] * 3), [4, 8])
        self.assertIn("3 kernels profiled, 4 expected", str(e.exception))


if __name__ == "__main__":
    unittest.main()
