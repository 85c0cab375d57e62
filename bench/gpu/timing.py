"""One GPU call timed with CUDA events after the L2 is emptied clean, beside triton's do_bench.

do_bench empties the L2 before every call by writing 256 MB, which leaves the L2 full of
dirty lines: the timed call then pays for writing ~60 MB of someone else's data back to
DRAM, some 9 to 10 us on the H200 (bench/gpu/decode_timing_methods.py measured it). For a
call of tens of microseconds (a short decode) that is a tenth of its time. CleanFlush does
the same write and then reads another 256 MB, so that the L2 holds clean lines only, as
Nsight Compute's cache control leaves it.

  flush = CleanFlush(torch)
  ms = flush.median_ms(fn)               # after a clean flush
  ms = flush.median_ms(fn, clean=False)  # after do_bench's flush, for comparison
"""
import statistics

FLUSH_BYTES = 256 << 20  # what triton's do_bench writes to empty the L2
# The least a round of interleaved_medians times a call for (ms): do_bench repeats a call
# about rep / (its time + the flush) times, and under ~10 ms a round of a call of a few
# milliseconds would hold only a handful of samples. Slow calls (naive, math) cost more so:
# at least MIN_ROUND_REP_MS per round, rounds as many as the calls timed.
MIN_ROUND_REP_MS = 10
MIN_ROUND_CLEAN_REPS = 5  # likewise for CleanFlush's timed calls, counted


class CleanFlush:
    def __init__(self, torch):
        self.torch = torch
        self.dirty = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
        self.clean = torch.zeros(FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def flush(self, clean=True):
        self.dirty.zero_()  # do_bench's flush: the L2 ends full of these dirty lines
        if clean:
            self.clean.sum()  # read 256 MB: the dirty lines go back to DRAM before the call

    def median_ms(self, fn, reps=50, clean=True):
        torch = self.torch
        times = []
        for _ in range(reps):
            self.flush(clean)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


def interleaved(fns, time_round):
    """The median time in ms of each of fns ({name: callable}), timed in turns so that no one
    of them owes its figure to where it stands in the list: time_round(fn, rounds) times fn
    once (its share of the time, a round's) and returns ms.

    Why: timed one after the other, the first of several calls reads faster than the same
    call timed next. On the H200 (2026-12-02, bench/gpu/NOTES.md, "fa3's work queue,
    measured") the same fa3 kernel took up to 8% longer timed second or fourth of five than
    timed first (d = 128, N = 2048 and 4096), the card's clock falling under sustained load.
    So the calls are timed in as many rounds as there are of them, each round in the order
    turned by one, so that each call is timed once in every place, and the figure is the
    median of its rounds'.
    """
    names = list(fns)
    rounds = len(names)
    per_round = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r:] + names[:r]:
            per_round[name].append(time_round(fns[name], rounds))
    return {name: statistics.median(times) for name, times in per_round.items()}


def interleaved_medians(do_bench, fns, rep=100, warmup=25):
    """interleaved() with do_bench's median as a round's time, its warmup and rep (ms) shared
    out over the rounds."""
    return interleaved(fns, lambda fn, rounds: do_bench(
        fn, warmup=max(1, warmup // rounds), rep=max(MIN_ROUND_REP_MS, rep // rounds),
        return_mode="median"))


def interleaved_clean_medians(flusher, fns, reps=50):
    """interleaved() with CleanFlush's median as a round's time, its reps shared out over
    the rounds (at least MIN_ROUND_CLEAN_REPS each)."""
    return interleaved(fns, lambda fn, rounds: flusher.median_ms(
        fn, reps=max(MIN_ROUND_CLEAN_REPS, reps // rounds)))
