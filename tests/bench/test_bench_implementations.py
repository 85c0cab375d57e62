"""bench/gpu/bench.py's list of what a sweep times at a length, without torch or a GPU: the
second library's kernel (--baseline-lib, --baseline-kernel) is timed beside --impls' choice
whenever it is given, never without it, and FLASHLAB_SKIP_FA3 leaves every fa3 out, the
baseline's fa3 too, but not a baseline of another kernel."""
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import bench  # noqa: E402


class Implementations(unittest.TestCase):
    def test_baseline_only_when_given(self):
        with mock.patch.dict(os.environ, {"FLASHLAB_SKIP_FA3": ""}):
            impls = bench.implementations(1024)
            self.assertFalse([i for i in impls if bench.is_baseline(i)])
            self.assertNotIn("fa3-baseline", bench.implementations(1024, ["fa3", "cudnn"]))
            both = bench.implementations(1024, ["fa3", "cudnn"], baseline="fa3")
            self.assertEqual(both, ["fa3", "fa3-baseline", "cudnn"])
            self.assertTrue(bench.is_flashlab("fa3-baseline"))
            fa2 = bench.implementations(1024, ["fa2", "cudnn"], baseline="fa2")
            self.assertEqual(fa2, ["fa2", "fa2-baseline", "cudnn"])
            self.assertTrue(bench.is_flashlab("fa2-baseline"))

    def test_every_variant_is_a_switch_of_fa3_options(self):
        fields = {f for f, _ in bench.fl.Fa3Options._fields_}
        with mock.patch.dict(os.environ, {"FLASHLAB_SKIP_FA3": ""}):
            for name, switches in bench.FA3_VARIANTS.items():
                self.assertTrue(set(switches) <= fields, name)
                self.assertEqual(bench.implementations(1024, [name]), [name])

    def test_skip_fa3_leaves_the_baseline_out(self):
        with mock.patch.dict(os.environ, {"FLASHLAB_SKIP_FA3": "1"}):
            impls = bench.implementations(1024, None, baseline="fa3")
            self.assertFalse([i for i in impls if i.startswith("fa3")])
            self.assertIn("fa2", impls)
            self.assertIn("fa2-baseline", bench.implementations(1024, None, baseline="fa2"))


if __name__ == "__main__":
    unittest.main()
