"""bench/gpu/stall_classes.py on source pages written here in Nsight Compute's CSV layout: the
opcode under a predicate and suffixes, each class's sums and shares, the retries of a wait
counted as branches, and the refusals of files that are no source page."""
import gzip
import io
import os
import random
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import stall_classes as sc  # noqa: E402

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)",
          "Warp Stall Sampling (Not-issued Samples)", "# Samples", "Instructions Executed"]


def page(instructions, header=HEADER):
    """A source page as ncu --csv writes it: its own lines, the kernel's name, the header,
    then (source, samples, not issued, executed) per instruction."""
    lines = ["==PROF== Connected to process 1 (/usr/bin/python3)",
             '"Kernel Name","void fa3_kernel<__nv_bfloat16, (int)64>(Fa3Params)",',
             ",".join(f'"{h}"' for h in header)]
    for k, (source, samples, not_issued, executed) in enumerate(instructions):
        values = {"Address": f"0x{0x7f00 + 16 * k:x}", "Source": f"      {source}",
                  "Warp Stall Sampling (All Samples)": samples,
                  "Warp Stall Sampling (Not-issued Samples)": not_issued,
                  "# Samples": samples, "Instructions Executed": executed}
        lines.append(",".join(f'"{values[h]}"' for h in header))
    lines.append("==PROF== Disconnected from process 1")
    return "\n".join(lines) + "\n"


def write(tmp, name, text, compress=False):
    path = os.path.join(tmp, name)
    with (gzip.open(path, "wt") if compress else open(path, "w")) as f:
        f.write(text)
    return path


class Opcodes(unittest.TestCase):
    def test_opcode_under_a_predicate_and_suffixes(self):
        self.assertEqual(sc.opcode("@!P0  BRA 0x7f3cf77b47e0"), "BRA")
        self.assertEqual(sc.opcode("@UP2 USEL UR8, URZ, 0x1, UP1"), "USEL")
        self.assertEqual(sc.opcode("@PT SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R0"), "SYNCS")
        self.assertEqual(sc.opcode("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT"), "HGMMA")
        self.assertIsNone(sc.opcode(""))

    def test_every_class_is_one_list(self):
        seen = {}
        for name, ops in sc.CLASSES.items():
            for op in ops:
                self.assertNotIn(op, seen, f"{op} in both {seen.get(op)} and {name}")
                seen[op] = name
        self.assertEqual(sc.class_of("MUFU"), "softmax arithmetic")
        self.assertEqual(sc.class_of("UIADD3"), sc.OTHER)


class Sums(unittest.TestCase):
    def test_classes_sum_the_rows_they_hold(self):
        rng = random.Random()
        rows = []
        want = {name: [0, 0, 0] for name in list(sc.CLASSES) + [sc.OTHER]}
        sources = {"tensor cores": "HGMMA.64x64x16.F32.BF16 R88, R120, gdesc[UR8].tnspB, R88",
                   "softmax arithmetic": "MUFU.EX2 R28, R28",
                   "barriers": "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R0",
                   "branches": "@!P0  BRA 0x7f3cf77b47e0",
                   "memory": "UTMALDG.4D [UR8], [UR32]",
                   sc.OTHER: "IMAD.U32 R0, RZ, RZ, UR44"}
        for _ in range(rng.randint(20, 60)):
            name = rng.choice(list(sources))
            samples = rng.randint(0, 500)
            not_issued = rng.randint(0, samples)
            executed = rng.randint(1, 10**6)
            rows.append((sources[name], samples, not_issued, executed))
            want[name][0] += executed
            want[name][1] += samples
            want[name][2] += not_issued
        with tempfile.TemporaryDirectory() as tmp:
            for compress in (False, True):
                path = write(tmp, "page.csv.gz" if compress else "page.csv", page(rows), compress)
                got = sc.by_class(sc.read_rows(path))
                for name, (executed, samples, not_issued) in want.items():
                    self.assertEqual(got[name], {"executed": executed, "samples": samples,
                                                 "not_issued": not_issued}, name)

    def test_the_printed_shares(self):
        rows = [("@!P0  BRA 0x7f3c", 300, 200, 10), ("MUFU.EX2 R28, R28", 100, 50, 70),
                ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT", 100, 150, 20)]
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "page.csv", page(rows))
            out = io.StringIO()
            with redirect_stdout(out):
                sc.main([path, "--top", "1"])
        lines = {line.split("  ")[0]: line for line in out.getvalue().splitlines()}
        # branches: 10 of 100 executed, 300 of 500 samples, 200 of 400 not issued
        self.assertRegex(lines["branches"], r"\b10\s+10\.0%\s+300\s+60\.0%\s+200\s+50\.0%")
        self.assertRegex(lines["tensor cores"], r"\b20\s+20\.0%\s+100\s+20\.0%\s+150\s+37\.5%")
        self.assertIn("0    200         10  @!P0  BRA", out.getvalue())


class Pages(unittest.TestCase):
    def test_only_the_first_kernels_page_is_read(self):
        first = page([("MUFU.EX2 R1, R1", 5, 2, 7)])
        second = page([("@!P0  BRA 0x7f3c", 50, 20, 70)])
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "pages.csv", first + second)
            rows = sc.read_rows(path)
        self.assertEqual(rows, [{"source": "MUFU.EX2 R1, R1", "executed": 7, "samples": 5,
                                 "not_issued": 2}])


class Refusals(unittest.TestCase):
    def refused(self, argv):
        err = io.StringIO()
        with redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            sc.main(argv)
        return str(cm.exception.code) + err.getvalue()

    def test_a_missing_file(self):
        self.assertIn("No such file", self.refused(["/nonexistent-folder/source.csv"]))

    def test_a_csv_that_is_no_source_page(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "details.csv", '"ID","Metric Name","Metric Value"\n"0","x","1"\n')
            self.assertIn("give Nsight Compute's source page as CSV", self.refused([path]))

    def test_a_page_without_the_samples(self):
        header = [h for h in HEADER if "Not-issued" not in h]
        text = page([], header)
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "page.csv", text)
            self.assertIn("lacks Warp Stall Sampling (Not-issued Samples)", self.refused([path]))

    def test_a_page_without_instructions(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "page.csv", page([]))
            self.assertIn("no instruction rows", self.refused([path]))

    def test_counts_that_are_no_numbers(self):
        text = page([("MUFU.EX2 R1, R1", "n/a", 1, 1)])
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "page.csv", text)
            self.assertIn("counts are not whole numbers", self.refused([path]))

    def test_a_negative_top(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = write(tmp, "page.csv", page([("MUFU.EX2 R1, R1", 1, 1, 1)]))
            self.assertIn("--top -2: give 0 or more", self.refused([path, "--top", "-2"]))


if __name__ == "__main__":
    unittest.main()
