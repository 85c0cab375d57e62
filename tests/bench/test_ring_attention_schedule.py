"""The CPU-side logic of bench/gpu/ring_attention.py, without torch or a GPU: its chunks and
layouts, the ring's rotation, the kind of kernel call each pair of chunks gets (checked by
counting the scores a causal mask allows, N (N + 1) / 2), and the backward's schedule of
dK/dV accumulators (each visits every other rank once, in ring order, and ends at its
owner; each link carries P - 1 K/V slices and P - 1 accumulators)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import ring_attention as ra  # noqa: E402
import flashlab_ctypes as fl  # noqa: E402

SIZES = (1, 17, 97, 113, 1023)
RANKS = (1, 2, 3, 4, 8)


def ranks_for(n):
    return [p for p in RANKS if p <= n]


class Chunks(unittest.TestCase):
    def test_chunk_of_is_floor_of_c_n_over_chunks(self):
        for n in SIZES:
            for chunks in (1, 2, 3, 7, 16):
                sizes = []
                for c in range(chunks):
                    begin, rows = ra.chunk_of(c, chunks, n)
                    self.assertEqual(begin, (c * n) // chunks)
                    sizes.append(rows)
                self.assertEqual(sum(sizes), n)
                self.assertLessEqual(max(sizes) - min(sizes), 1)

    def test_every_row_on_exactly_one_rank(self):
        for n in SIZES:
            for P in ranks_for(n):
                for layout in ("contiguous", "zigzag"):
                    rows = []
                    for r in range(P):
                        chunks = ra.rank_slice(r, P, n, layout)
                        self.assertEqual(len(chunks), 1 if layout == "contiguous" else 2)
                        for begin, count in chunks:
                            rows.extend(range(begin, begin + count))
                    self.assertEqual(sorted(rows), list(range(n)), (n, P, layout))

    def test_zigzag_holds_one_early_and_one_late_chunk(self):
        n, P = 1023, 4
        for r in range(P):
            early, late = ra.rank_slice(r, P, n, "zigzag")
            self.assertEqual(early, ra.chunk_of(r, 2 * P, n))
            self.assertEqual(late, ra.chunk_of(2 * P - 1 - r, 2 * P, n))


class Rotation(unittest.TestCase):
    def test_each_slice_once_per_step_and_once_per_rank(self):
        for P in RANKS:
            for step in range(P):
                self.assertEqual(sorted(ra.kv_source(r, step, P) for r in range(P)),
                                 list(range(P)))
            for r in range(P):
                self.assertEqual(sorted(ra.kv_source(r, s, P) for s in range(P)),
                                 list(range(P)))
                for s in range(1, P):  # what r holds at s, r - 1 held at s - 1
                    self.assertEqual(ra.kv_source(r, s, P), ra.kv_source((r - 1) % P, s - 1, P))

    def test_pair_kinds_cover_exactly_the_allowed_scores(self):
        for n in SIZES:
            for P in ranks_for(n):
                for layout in ("contiguous", "zigzag"):
                    for causal in (False, True):
                        scores = 0
                        for r in range(P):
                            for s in range(P):
                                k_chunks = ra.rank_slice(ra.kv_source(r, s, P), P, n, layout)
                                for qc in ra.rank_slice(r, P, n, layout):
                                    for kc in k_chunks:
                                        if qc[1] == 0 or kc[1] == 0:
                                            continue
                                        kind = ra.pair_kind(qc, kc, causal)
                                        if kind == fl.CAUSAL_NONE:
                                            scores += qc[1] * kc[1]
                                        elif kind == fl.CAUSAL_TOP_LEFT:
                                            scores += qc[1] * (qc[1] + 1) // 2
                        expected = n * (n + 1) // 2 if causal else n * n
                        self.assertEqual(scores, expected, (n, P, layout, causal))


class BackwardSchedule(unittest.TestCase):
    def test_sends(self):
        for P in RANKS:
            self.assertEqual(sum(ra.sends_kv(s, P) for s in range(P)), P - 1)
            self.assertEqual(sum(ra.sends_gradients(s, P) for s in range(P)), P - 1)
            self.assertFalse(ra.sends_gradients(0, P))  # the owner keeps its step-0 share
            self.assertFalse(ra.sends_kv(P - 1, P))     # no step reads K, V after the last

    def test_each_accumulator_visits_every_other_rank_and_ends_at_its_owner(self):
        for P in RANKS:
            visits, ends, kv_sends, gradient_sends = ra.accumulator_trips(P)
            for owner in range(P):
                self.assertEqual(visits[owner], [(owner + i) % P for i in range(1, P)])
                self.assertEqual(ends[owner], owner)
            self.assertEqual(kv_sends, [P - 1] * P)
            self.assertEqual(gradient_sends, [P - 1] * P)


if __name__ == "__main__":
    unittest.main()
