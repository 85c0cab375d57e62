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
  ms = flush.median_ms(fn, clean=False, wait_us=20)  # the same, then 20 us of an idle GPU
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
        self._cycles_per_us = None  # the spin kernel's rate, timed at its first use

    def flush(self, clean=True, wait_us=0.0):
        self.dirty.zero_()  # do_bench's flush: the L2 ends full of these dirty lines
        if clean:
            self.clean.sum()  # read 256 MB: the dirty lines go back to DRAM before the call
        if wait_us > 0:  # the GPU idles (one thread spinning) before the call
            self.torch.cuda._sleep(int(wait_us * self.cycles_per_us()))

    def cycles_per_us(self):
        """The spin kernel's clock cycles per microsecond, timed once with events."""
        if self._cycles_per_us is None:
            torch, cycles = self.torch, 4_000_000
            torch.cuda._sleep(cycles)  # warm up
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            torch.cuda.synchronize()
            self._cycles_per_us = cycles / (start.elapsed_time(end) * 1e3)
        return self._cycles_per_us

    def median_ms(self, fn, reps=50, clean=True, wait_us=0.0):
        torch = self.torch
        times = []
        for _ in range(reps):
            self.flush(clean, wait_us)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


def balanced_orders(count):
    """The orders of `count` calls for timing them in turns: a Williams design (a balanced Latin
    square). Each call stands in every place of a round equally often, and each call follows
    every other call equally often: count rounds for an even count, 2 x count for an odd one
    (the square and its mirror). Rows of indices into the list of calls.

    Why both: a card's clock falls under sustained load, so the first call after a pause reads
    faster (the place), and a call timed right after a heavy one (cuDNN at 600 TFLOP/s) reads
    slower than after a light one (the predecessor). Turning one order by one place each round
    balances the places but keeps every call's predecessor the same in every round but one: on
    the H200 (2026-12-03, bench/gpu/NOTES.md, "Timed in turns: the call before counts") fa2
    timed right after cuDNN read 3 to 7% slower than the same kernel timed after another.
    """
    first = [0]
    for i in range(1, count):  # 0, 1, n-1, 2, n-2, ...: every step between neighbours once
        first.append((i + 1) // 2 if i % 2 else count - i // 2)
    square = [[(x + r) % count for x in first] for r in range(count)]
    return square if count % 2 == 0 or count == 1 else square + [row[::-1] for row in square]


def rotated_orders(count):
    """The order turned by one place each round: places balanced, predecessors not (kept to
    show the difference: bench.py --turns rotated)."""
    return [[(x + r) % count for x in range(count)] for r in range(count)]


ORDERS = {"balanced": balanced_orders, "rotated": rotated_orders}


def interleaved(fns, time_round, orders=balanced_orders):
    """The median time in ms of each of fns ({name: callable}), timed in turns so that no one
    of them owes its figure to where it stands in the list or to what ran just before it:
    time_round(fn, rounds) times fn once (its share of the time, a round's) and returns ms;
    `orders` gives the rounds' orders (balanced_orders).

    Why: timed one after the other, the first of several calls reads faster than the same
    call timed next. On the H200 (2026-12-02, bench/gpu/NOTES.md, "fa3's work queue,
    measured") the same fa3 kernel took up to 8% longer timed second or fourth of five than
    timed first (d = 128, N = 2048 and 4096), the card's clock falling under sustained load;
    and what runs just before a call counts too (balanced_orders). The figure is the median of
    a call's rounds.
    """
    names = list(fns)
    rows = orders(len(names))
    per_round = {name: [] for name in names}
    for row in rows:
        for i in row:
            per_round[names[i]].append(time_round(fns[names[i]], len(rows)))
    return {name: statistics.median(times) for name, times in per_round.items()}


def interleaved_medians(do_bench, fns, rep=100, warmup=25, orders=balanced_orders):
    """interleaved() with do_bench's median as a round's time, its warmup and rep (ms) shared
    out over the rounds."""
    return interleaved(fns, lambda fn, rounds: do_bench(
        fn, warmup=max(1, warmup // rounds), rep=max(MIN_ROUND_REP_MS, rep // rounds),
        return_mode="median"), orders)


def interleaved_clean_medians(flusher, fns, reps=50, orders=balanced_orders):
    """interleaved() with CleanFlush's median as a round's time, its reps shared out over
    the rounds (at least MIN_ROUND_CLEAN_REPS each)."""
    return interleaved(fns, lambda fn, rounds: flusher.median_ms(
        fn, reps=max(MIN_ROUND_CLEAN_REPS, reps // rounds)), orders)
