"""bench/gpu/bench.py's list of what a sweep times at a length, without torch or a GPU: the
second library's kernel (--baseline-lib, --baseline-kernel) is timed beside --impls' choice
whenever it is given, never without it, and FLASHLAB_SKIP_FA3 leaves every fa3 out, the
baseline's fa3 too, but not a baseline of another kernel; fa3-kv<P> names fa3 with its
sections on P percent of the L2; --ablation's variants carry every field of the default
options and move only the switches each names."""
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

    def test_share_variants_are_named_by_their_percent(self):
        fields = {f for f, _ in bench.fl.Fa3Options._fields_}
        self.assertEqual(bench.fa3_variant("fa3-kv37"), {"kv_l2_share": 37})
        self.assertTrue(set(bench.fa3_variant("fa3-kv37")) <= fields)
        self.assertTrue(bench.is_flashlab("fa3-kv100"))
        for name in ("fa3-kv", "fa3-kvx", "fa3-kv-5", "fa3-persistentx"):
            self.assertIsNone(bench.fa3_variant(name), name)
            self.assertFalse(bench.is_flashlab(name), name)
        with mock.patch.dict(os.environ, {"FLASHLAB_SKIP_FA3": ""}):
            self.assertNotIn("fa3-kv37", bench.implementations(1024))
            self.assertEqual(bench.implementations(1024, ["fa3", "fa3-kv37", "cudnn"]),
                             ["fa3", "fa3-kv37", "cudnn"])
        self.assertEqual(bench.one_implementation("fa3-kv62"), "fa3-kv62")
        with self.assertRaises(bench.argparse.ArgumentTypeError) as refused:
            bench.one_implementation("fa3-kvx")
        self.assertIn("fa3-kv<P>", str(refused.exception))

    def test_ablation_variants_keep_every_default_field(self):
        # A library whose resolved defaults set every field to a value of its own (as the
        # kernel's d = 128 defaults would, kv_l2_share included): each variant must carry the
        # default in every field it does not move, a field added to the options later too.
        class FakeLibrary:
            def fa3_default_options(self):
                return bench.fl.Fa3Options()

            def fa3_resolved_options(self, d, options):
                resolved = bench.fl.Fa3Options.from_buffer_copy(options)
                resolved.warp_specialized, resolved.stages, resolved.ping_pong = 1, 2, 1
                resolved.intra_overlap, resolved.grid, resolved.kv_l2_share = 1, 2, 37
                return resolved

        fields = [f for f, _ in bench.fl.Fa3Options._fields_]
        variants = bench.ablation_options(FakeLibrary(), 128)
        default = variants[0]
        self.assertEqual(default.kv_l2_share, 37)
        moved = set()
        for v in variants[1:]:
            changed = {f for f in fields if getattr(v, f) != getattr(default, f)}
            self.assertTrue(changed, v.describe())
            self.assertNotIn("kv_l2_share", changed, v.describe())
            self.assertNotIn("rescale_counts", changed, v.describe())
            moved |= changed
        self.assertTrue({"warp_specialized", "stages", "ping_pong", "intra_overlap",
                         "conditional_rescale"} <= moved)
        last = variants[-1]  # everything off
        self.assertEqual((last.warp_specialized, last.ping_pong, last.intra_overlap,
                          last.stages), (0, 0, 0, 1))

    def test_skip_fa3_leaves_the_baseline_out(self):
        with mock.patch.dict(os.environ, {"FLASHLAB_SKIP_FA3": "1"}):
            impls = bench.implementations(1024, None, baseline="fa3")
            self.assertFalse([i for i in impls if i.startswith("fa3")])
            self.assertIn("fa2", impls)
            self.assertIn("fa2-baseline", bench.implementations(1024, None, baseline="fa2"))


if __name__ == "__main__":
    unittest.main()
