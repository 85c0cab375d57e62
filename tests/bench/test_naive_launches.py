"""bench/gpu/naive_launches.py's reading of Nsight Compute's lines: cuBLAS's output tile from an
nvjet kernel's name as {rows, columns} of the row-major output (a name's AxB is {B, A}, as
measured::kCublasTiles holds it), nothing from another kernel's name, and one row per launch
in launch order with its metrics; a shape's entry for the table from its launches."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import naive_launches  # noqa: E402
import ncu_csv  # noqa: E402

HEADER = '"ID","Kernel Name","Grid Size","Metric Name","Metric Unit","Metric Value"'


class NaiveLaunches(unittest.TestCase):
    def test_tiles_from_names(self):
        self.assertEqual(naive_launches.tile_of(
            "nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_ptrBatch_TNT"), (128, 256))
        self.assertEqual(naive_launches.tile_of("nvjet_sm90_tst_64x8_64x16_1x2_h_bz_ptrBatch_NNT"),
                         (8, 64))
        self.assertIsNone(naive_launches.tile_of("softmax_rows<bf16>"))
        self.assertIsNone(naive_launches.tile_of("nvjet_sm90_256x128"))

    def test_rows_in_launch_order(self):
        lines = [HEADER, "the program's own line"]
        for i, name in [(2, "nvjet_sm90_tst_64x24_x"), (0, "nvjet_sm90_tss_128x64_x"),
                        (1, "softmax_rows<bf16>")]:
            lines += [f'"{i}","{name}","(2, 64, 1)","l1tex__m_xbar2l1tex_read_bytes.sum","byte",'
                      f'"{(i + 1) * 1000:,}"',
                      f'"{i}","{name}","(2, 64, 1)","dram__bytes_write.sum","byte","{i}"']
        rows = naive_launches.launch_rows(lines)
        self.assertEqual([r["kernel"][:14] for r in rows],
                         ["nvjet_sm90_tss", "softmax_rows<b", "nvjet_sm90_tst"])
        self.assertEqual([r["sm_read_bytes"] for r in rows], [1000, 2000, 3000])
        self.assertEqual([r["dram_write_bytes"] for r in rows], [0, 1, 2])
        self.assertEqual(rows[0]["grid"], "(2, 64, 1)")
        self.assertNotIn("lts_bytes", rows[0])  # a metric ncu did not print is not made up

    def test_table_entry(self):
        rows = [{"kernel": k} for k in (
            "nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_ptrBatch_TNT", "softmax_rows<bf16>",
            "nvjet_sm90_tst_64x160_64x7_1x2_h_bz_ptrBatch_NNT",
            "nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_ptrBatch_TNT", "softmax_rows<bf16>",
            "nvjet_sm90_tst_64x128_64x8_1x2_h_bz_ptrBatch_NNN")]
        self.assertEqual(naive_launches.table_entry(16, 16384, 64, rows),
                         "    CublasTiles{16384, 64, 16, {128, 256}, {160, 64}},  "
                         "// tss_256x128, tst_64x160")
        with self.assertRaises(ValueError) as e:
            naive_launches.table_entry(1, 1024, 64, rows[:2])
        self.assertIn("fewer than two nvjet launches", str(e.exception))

    def test_first_read_left_out(self):
        # The profiled range starts with torch's read of its own (ncu_csv.first_read), whose
        # row the sums leave out; a range that does not start with it is refused.
        lines = [HEADER]
        for i, name in [(0, "void at::native::reduce_kernel<512, 1>(...)"),
                        (1, "nvjet_sm90_tss_128x64_x"), (2, "softmax_rows<bf16>")]:
            lines.append(f'"{i}","{name}","(2, 64, 1)","dram__bytes_write.sum","byte","{i}"')
        rows = ncu_csv.without_first_read(naive_launches.launch_rows(lines))
        self.assertEqual([r["kernel"][:14] for r in rows], ["nvjet_sm90_tss", "softmax_rows<b"])
        self.assertEqual([r["dram_write_bytes"] for r in rows], [1, 2])
        with self.assertRaises(ValueError) as e:
            ncu_csv.without_first_read(rows)
        self.assertIn("should start with the first read (reduce_kernel), not nvjet", str(e.exception))
        with self.assertRaises(ValueError):
            ncu_csv.without_first_read([])

    def test_replay_mode_is_compares(self):
        # One fact in two languages: the scripts' replay mode and flashlab compare's.
        header = os.path.join(HERE, "..", "..", "lessons", "gpu_bridge", "ncu_bytes.hpp")
        with open(header) as f:
            text = f.read()
        self.assertIn(f'kNcuReplayMode = "{ncu_csv.REPLAY_MODE}";', text)
        self.assertEqual(ncu_csv.REPLAY, ["--replay-mode", ncu_csv.REPLAY_MODE])


if __name__ == "__main__":
    unittest.main()
