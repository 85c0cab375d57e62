"""bench/gpu/timing.py's interleaved timing (do_bench's and the clean flush's) without torch
or a GPU: every call is timed equally often in every place of the order and after every other
call, so a clock that favours whichever call comes first after a pause, or one slowed by the
call before, no longer tells identical calls apart, as it does when they are timed one after
the other, or in an order merely turned each round."""
import os
import random
import statistics
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import timing  # noqa: E402


class FakeBench:
    """do_bench on a card whose clock is `boost` higher for the first call after a pause and
    half that for the second, then steady (it falls under sustained load, and stays down)."""

    def __init__(self, cost, boost=0.07, pause_every=None):
        self.cost, self.boost = cost, boost
        self.pause_every = pause_every  # a pause before every this many calls, if set
        self.calls = []  # (name, calls since the pause)
        self.since_pause = 0

    def pause(self):
        self.since_pause = 0

    def __call__(self, fn, warmup, rep, return_mode):
        assert return_mode == "median" and warmup >= 1 and rep >= 10
        name = fn()
        if self.pause_every and len(self.calls) % self.pause_every == 0:
            self.pause()
        self.calls.append((name, self.since_pause))
        speed = 1 + {0: self.boost, 1: self.boost / 2}.get(self.since_pause, 0)
        self.since_pause += 1
        return self.cost[name] / speed


def named(names):
    return {n: (lambda n=n: n) for n in names}


class InterleavedMedians(unittest.TestCase):
    def test_every_call_in_every_place_and_after_every_other(self):
        for count in (1, 2, 3, 4, 5, 9, 10):
            names = [f"impl{i}" for i in range(count)]
            bench = FakeBench({n: 1.0 for n in names})
            timing.interleaved_medians(bench, named(names))
            rounds = count if count % 2 == 0 or count == 1 else 2 * count
            self.assertEqual(len(bench.calls), rounds * count)
            order = [n for n, _ in bench.calls]
            for r in range(rounds):
                self.assertEqual(sorted(order[r * count:(r + 1) * count]), sorted(names))
            for n in names:  # each call in every place of its round equally often
                places = [i % count for i, m in enumerate(order) if m == n]
                self.assertEqual(sorted(places), sorted(list(range(count)) * (rounds // count)))
            follows = {}  # (call, the call just before it in its round): how often
            for r in range(rounds):
                row = order[r * count:(r + 1) * count]
                for before, after in zip(row, row[1:]):
                    follows[(after, before)] = follows.get((after, before), 0) + 1
            if count > 1:  # every ordered pair of neighbours equally often
                self.assertEqual(len(follows), count * (count - 1))
                self.assertEqual(set(follows.values()), {rounds // count})

    def test_the_call_before_no_longer_tells_identical_calls_apart(self):
        # A card on which a call reads 6% slower right after the heavy one ("cudnn").
        class AfterHeavy(FakeBench):
            def __call__(self, fn, warmup, rep, return_mode):
                name = fn()
                after_heavy = bool(self.calls) and self.calls[-1][0] == "cudnn"
                self.calls.append((name, 0))
                return self.cost[name] * (1.06 if after_heavy else 1.0)

        names = ["new", "old", "flash", "cudnn"]  # new and old: the same kernel
        cost = {n: 1.0 for n in names}
        rotated = timing.interleaved_medians(AfterHeavy(cost), named(names),
                                             orders=timing.rotated_orders)
        self.assertGreater(rotated["new"] / rotated["old"], 1.05)  # new always after cudnn
        balanced = timing.interleaved_medians(AfterHeavy(cost), named(names))
        self.assertAlmostEqual(balanced["new"] / balanced["old"], 1.0, places=12)

    def test_identical_calls_read_the_same_whatever_their_place(self):
        cost = random.uniform(0.1, 2.0)
        names = ["first", "second", "third", "fourth"]
        # One after the other, with a pause before the set: the first reads faster.
        bench = FakeBench({n: cost for n in names})
        bench.pause()
        one_by_one = {n: bench(lambda n=n: n, warmup=25, rep=100, return_mode="median")
                      for n in names}
        self.assertLess(one_by_one["first"], one_by_one["second"])
        self.assertLess(one_by_one["second"], one_by_one["third"])
        # In turns, each round after a pause: equal, because each call comes first (and
        # second) once only. Repeated in one order, the first call would gain every round.
        bench = FakeBench({n: cost for n in names}, pause_every=len(names))
        times = timing.interleaved_medians(bench, named(names))
        self.assertAlmostEqual(max(times.values()) / min(times.values()), 1.0, places=12)
        bench = FakeBench({n: cost for n in names}, pause_every=len(names))
        rounds = {n: [] for n in names}
        for _ in names:  # as many rounds, the order never turned
            for n in names:
                rounds[n].append(bench(lambda n=n: n, warmup=25, rep=100, return_mode="median"))
        repeated = {n: statistics.median(t) for n, t in rounds.items()}
        self.assertLess(repeated["first"], repeated["second"])
        self.assertLess(repeated["second"], repeated["third"])

    def test_a_faster_call_stays_faster(self):
        bench = FakeBench({"slow": 1.0, "fast": 0.9, "other": 1.0})
        times = timing.interleaved_medians(bench, named(["slow", "fast", "other"]))
        self.assertLess(times["fast"], times["slow"])
        ratio = times["fast"] / times["slow"]
        self.assertAlmostEqual(ratio, 0.9, delta=0.02)

    def test_the_median_of_the_rounds(self):
        answers = iter([3.0])  # one call: one round
        times = timing.interleaved_medians(
            lambda fn, warmup, rep, return_mode: next(answers), {"only": lambda: None})
        self.assertEqual(times["only"], 3.0)
        answers = iter([5.0, 1.0, 9.0, 2.0])  # two calls, two rounds: a b | b a
        times = timing.interleaved_medians(
            lambda fn, warmup, rep, return_mode: next(answers),
            {"a": lambda: None, "b": lambda: None})
        self.assertEqual(times["a"], statistics.median([5.0, 2.0]))
        self.assertEqual(times["b"], statistics.median([1.0, 9.0]))

    def test_the_clean_flush_timed_in_turns_too(self):
        calls = []

        class FakeFlush:
            def median_ms(self, fn, reps):
                calls.append((fn(), reps))
                return {"a": 2.0, "b": 1.0, "c": 3.0}[calls[-1][0]]

        times = timing.interleaved_clean_medians(FakeFlush(), named(["a", "b", "c"]), reps=60)
        self.assertEqual(times, {"a": 2.0, "b": 1.0, "c": 3.0})
        self.assertEqual("".join(n for n, _ in calls), "abc" "bca" "cab" "cba" "acb" "bac")
        self.assertTrue(all(reps == 10 for _, reps in calls))  # 60 shared over 6 rounds
        calls.clear()
        timing.interleaved_clean_medians(FakeFlush(), named(["a", "b", "c"]), reps=6)
        self.assertTrue(all(reps == timing.MIN_ROUND_CLEAN_REPS for _, reps in calls))


if __name__ == "__main__":
    unittest.main()
