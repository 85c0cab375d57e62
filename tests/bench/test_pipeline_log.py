"""bench/gpu/pipeline_log.py on logs written here with known phases: each phase of an item, the
mainloop's section, the item's fixed cost in sections, an item's S_0 issued before its `item`
entry (chained) counted for it, a block drawn as a timeline, and the refusals (a file that is
not a log, one with too few items, a log whose items are too short to read a section from, a
block the log lacks), and each block's start, end and work with the grid's balance (--blocks),
on logs with and without the block_start_ns column."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "gpu", "pipeline_log.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import pipeline_log  # noqa: E402

COLUMNS = ["batch", "heads", "N", "d", "causal", "stages", "ping_pong", "overlap_items", "block",
           "sm", "role", "event", "item", "j", "t_ns"]
# The phases every item of the written logs has, in ns, and its KV tiles and section.
PHASES = {"start": 30, "s0": 100, "softmax0": 200, "last_wait": 50, "last_pv": 300, "o": 150,
          "next": 20}
TILES, SECTION = 6, 1000
O_PHASES = {"o_wait": 40, "o_stage": 60, "o_store": 50}  # the parts of PHASES["o"]


def item_rows(t0, item, tiles=TILES, section=SECTION, chained=False):
    """(event, item, j, t) of one consumer's item starting at t0; returns them and the next start."""
    p = PHASES
    rows = [("item", item, tiles, t0), ("q_landed", item, -1, t0 + 10),
            ("data_landed", item, 0, t0 + 20)]
    t = t0 + p["start"]
    rows.append(("scores_issued", item, 0, t if not chained else t0 - 5))
    t += p["s0"]
    rows.append(("scores_landed", item, 0, t))
    t += p["softmax0"]
    rows.append(("softmax_done", item, 0, t))
    for j in range(1, tiles):
        rows += [("data_landed", item, j, t + 5), ("scores_issued", item, j, t + 10),
                 ("scores_landed", item, j, t + 300), ("values_landed", item, j - 1, t + 400)]
        t += section
        rows.append(("softmax_done", item, j, t))
    t += p["last_wait"]
    rows.append(("values_issued", item, tiles - 1, t))
    t += p["last_pv"]
    rows.append(("values_landed", item, tiles - 1, t))
    rows += [("o_ready", item, -1, t + O_PHASES["o_wait"]),
             ("o_staged", item, -1, t + O_PHASES["o_wait"] + O_PHASES["o_stage"])]
    t += p["o"]
    rows.append(("o_written", item, -1, t))
    return rows, t + p["next"]


def write_log(path, items=3, tiles=TILES, consumers=2, chained_second=False):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for c in range(consumers):
            t = 100.0 * c
            for k in range(items):
                rows, t = item_rows(t, 7 * k, tiles, chained=chained_second and k == 1)
                # The chained S_0 is logged before the item's own entry, at the last item's end.
                rows.sort(key=lambda r: r[3])
                for event, item, j, tt in rows:
                    w.writerow([16, 16, 1024, 128, 0, 2, 1, 0, 0, 5, f"consumer{c}", event, item, j,
                                f"{tt:.1f}"])
        w.writerow([16, 16, 1024, 128, 0, 2, 1, 0, 0, 5, "producer", "q_issued", 0, -1, "1.0"])


class PipelineLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "log.csv")

    def tearDown(self):
        self.dir.cleanup()

    def test_phases_section_and_fixed_cost(self):
        write_log(self.path)
        r = pipeline_log.summarise(self.path)
        for name, ns in {**PHASES, **O_PHASES}.items():
            self.assertAlmostEqual(r[f"{name}_ns"], ns, msg=name)
        self.assertAlmostEqual(r["mainloop_ns"], (TILES - 1) * SECTION)
        self.assertAlmostEqual(r["section_ns"], SECTION)
        span = sum(PHASES.values()) + (TILES - 1) * SECTION
        self.assertAlmostEqual(r["item_ns"], span)
        self.assertAlmostEqual(r["fixed_ns"], span - TILES * SECTION)
        self.assertAlmostEqual(r["fixed_sections"], (span - TILES * SECTION) / SECTION)
        self.assertEqual(r["items"], 4)  # two consumers, two items each followed by another
        self.assertEqual((r["N"], r["d"], r["causal"]), ("1024", "128", "0"))
        self.assertEqual(r["log"], "log.csv")

    def test_a_chained_s0_counts_for_its_own_item(self):
        write_log(self.path, chained_second=True)
        _, by_role = pipeline_log.read_log(self.path)
        items = pipeline_log.consumer_items(by_role[(0, "consumer0")])
        self.assertEqual([it["item"] for it in items], [0, 7, 14])
        self.assertEqual(pipeline_log.first(items[1]["events"], "scores_issued", 0),
                         items[1]["t"] - 5)
        self.assertIsNone(pipeline_log.first(items[0]["events"], "scores_issued", 1 + TILES))

    def test_the_table_and_its_csv(self):
        write_log(self.path)
        out = os.path.join(self.dir.name, "phases.csv")
        run = subprocess.run([sys.executable, SCRIPT, self.path, "--csv", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("fixed_sections", run.stdout.splitlines()[0])
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(float(rows[0]["softmax0_ns"]), PHASES["softmax0"])

    def test_a_block_drawn(self):
        with open(self.path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            for event, j, t in [("item", 1, 0), ("scores_issued", 0, 100),
                                ("scores_landed", 0, 300), ("softmax_done", 0, 500),
                                ("values_issued", 0, 600), ("values_landed", 0, 800),
                                ("o_written", -1, 1000)]:
                w.writerow([1, 1, 128, 128, 0, 2, 1, 0, 3, 5, "consumer0", event, 0, j, t])
            w.writerow([1, 1, 128, 128, 0, 2, 1, 0, 3, 5, "producer", "q_issued", 0, -1, 50])
            w.writerow([1, 1, 128, 128, 0, 2, 1, 0, 3, 5, "producer", "k_issued", 0, 0, 250])
        lines = pipeline_log.draw(self.path, 3, 0.0, 12, 100.0)
        self.assertEqual(lines, [" consumer0 |.SSEEEPPOOO.", "  producer |Q.K........."])
        run = subprocess.run([sys.executable, SCRIPT, self.path, "--draw", "4"],
                             capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("block 4 is not in the log", run.stderr)
        run = subprocess.run([sys.executable, SCRIPT, self.path, "--draw", "3", "--step-ns", "0"],
                             capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("--step-ns above 0", run.stderr)

    def test_blocks_their_ends_on_one_clock_and_the_balance(self):
        # Block 2 starts 500 ns after block 0 (on the GPU's clock): its O at 9,000 ns of its own
        # is at 9,500; block 0 ends at 10,000 (its later consumer), so the mean end over the
        # last is (10,000 + 9,500) / 2 / 10,000. A producer row counts no work.
        with open(self.path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS + ["block_start_ns"])
            for block, sm, start, role, event, item, j, t in [
                    (0, 7, 0, "consumer0", "item", 0, 3, 0),
                    (0, 7, 0, "consumer0", "o_written", 0, -1, 6000),
                    (0, 7, 0, "consumer1", "item", 0, 2, 0),
                    (0, 7, 0, "consumer0", "item", 9, 1, 6000),
                    (0, 7, 0, "consumer1", "o_written", 0, -1, 10000),
                    (2, 40, 500, "consumer0", "item", 1, 5, 0),
                    (2, 40, 500, "consumer0", "o_written", 1, -1, 9000),
                    (2, 40, 500, "producer", "q_issued", 1, -1, 10)]:
                w.writerow([1, 1, 128, 64, 1, 4, 0, 0, block, sm, role, event, item, j, t, start])
        blocks, balance = pipeline_log.block_ends(self.path)
        self.assertEqual([(b["block"], b["sm"], b["start_ns"], b["end_ns"], b["items"],
                           b["consumer_tiles"]) for b in blocks],
                         [(0, 7, 0.0, 10000.0, 2, 6), (2, 40, 500.0, 9500.0, 1, 5)])
        self.assertAlmostEqual(balance, (10000 + 9500) / 2 / 10000)
        out = os.path.join(self.dir.name, "blocks.csv")
        run = subprocess.run([sys.executable, SCRIPT, self.path, "--blocks", "--csv", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("mean end over the last 0.9750", run.stdout)
        with open(out) as f:
            self.assertEqual([r["end_ns"] for r in csv.DictReader(f)], ["10000.0", "9500.0"])
        # A log from before the column: every block starts at 0 on its own clock.
        write_log(self.path)
        blocks, _ = pipeline_log.block_ends(self.path)
        self.assertEqual([b["start_ns"] for b in blocks], [0.0])
        run = subprocess.run([sys.executable, SCRIPT, self.path, self.path, "--blocks"],
                             capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("--blocks takes one log", run.stderr)
        with open(self.path, "w", newline="") as f:  # a block that wrote no O
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            w.writerow([1, 1, 128, 64, 1, 4, 0, 0, 0, 5, "producer", "q_issued", 0, -1, 1])
        with self.assertRaisesRegex(pipeline_log.LogError, "no block wrote an O"):
            pipeline_log.block_ends(self.path)

    def test_refusals(self):
        bad = os.path.join(self.dir.name, "bad.csv")
        with open(bad, "w") as f:
            f.write("a,b\n1,2\n")
        for path, words in [(bad, "not a bench_pipeline_log CSV"),
                            (os.path.join(self.dir.name, "none.csv"), "cannot read")]:
            run = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
            self.assertNotEqual(run.returncode, 0)
            self.assertIn(words, run.stderr)
        write_log(self.path, items=1)
        with self.assertRaisesRegex(pipeline_log.LogError, "no consumer ran two items"):
            pipeline_log.summarise(self.path)
        write_log(self.path, tiles=3)
        with self.assertRaisesRegex(pipeline_log.LogError, "no item has 5 KV tiles"):
            pipeline_log.summarise(self.path)
        write_log(self.path)
        run = subprocess.run([sys.executable, SCRIPT, self.path, "--csv",
                              os.path.join(self.dir.name, "no", "such", "dir.csv")],
                             capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("cannot write", run.stderr)


if __name__ == "__main__":
    unittest.main()
