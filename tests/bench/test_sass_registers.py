"""bench/gpu/sass_registers.py on SASS written here in cuobjdump's format: which FFMA read three
vector registers, which instructions have two unreused sources in one bank, and which loop is
the main one (not an mbarrier retry that jumps back from after the kernel's end)."""
import io
import os
import random
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
import sass_registers as sr  # noqa: E402


def sass(name, instructions, start=0):
    """cuobjdump's text for one function: a header, then one line per instruction."""
    lines = [f"\t\tFunction : {name}", "\t.headerflags\t@\"EF_CUDA_SM90\""]
    for k, text in enumerate(instructions):
        address = start + 16 * k
        lines.append(f"        /*{address:04x}*/                   {text} ;"
                     f"                  /* 0x000000{random.getrandbits(40):010x} */")
    return "\n".join(lines) + "\n"


class Operands(unittest.TestCase):
    def test_ffma_with_three_vector_registers(self):
        self.assertTrue(sr.reads_three_vector_registers("FFMA R15, R29, R5, -R16.reuse"))
        self.assertTrue(sr.reads_three_vector_registers("FFMA.FTZ R1, -|R2|, R3.reuse, R4"))
        # s in a uniform register or the constant bank: two vector registers only
        self.assertFalse(sr.reads_three_vector_registers("FFMA R123, R25, UR17, -R10.reuse"))
        self.assertFalse(sr.reads_three_vector_registers("FFMA R1, R2, c[0x0][0x210], R3"))
        self.assertFalse(sr.reads_three_vector_registers("FFMA R1, R2, 1.4426950216293334961, R3"))
        self.assertFalse(sr.reads_three_vector_registers("FADD R1, R2, R3"))
        # RZ is no register read
        self.assertFalse(sr.reads_three_vector_registers("FFMA R1, R2, R3, RZ"))

    def test_bank_pairs_count_register_file_reads_only(self):
        self.assertTrue(sr.bank_pair("FADD R7, R180, R4"))       # 180 and 4: both even
        self.assertFalse(sr.bank_pair("FADD R7, R181, R4"))      # odd and even
        self.assertTrue(sr.bank_pair("FFMA R1, R3, UR4, -R5"))    # 3 and 5: both odd
        self.assertFalse(sr.bank_pair("IADD3 R1, R2, R4, RZ"))   # not a floating-point instruction
        self.assertTrue(sr.bank_pair("FMNMX R1, R2, R6, !PT", banks=4))
        self.assertFalse(sr.bank_pair("FMNMX R1, R2, R4, !PT", banks=4))
        # .reuse keeps a source for the next instruction: the one that marks it still reads
        # the register file; the next one, with the same register in the same slot, does not.
        marking = "FADD R7, R180.reuse, R9"
        self.assertTrue(sr.bank_pair("FADD R7, R180.reuse, R4"))
        self.assertFalse(sr.bank_pair("FADD R8, R180, R4", previous=marking))
        self.assertTrue(sr.bank_pair("FADD R8, R4, R180", previous=marking))  # another slot
        self.assertTrue(sr.bank_pair("FADD R8, R180, R4", previous="FADD R7, R180, R9"))


class MainLoop(unittest.TestCase):
    def kernel(self):
        # 0x00: set-up; 0x20 .. 0x70: a loop with HGMMA closed by a predicated branch back;
        # then the end, and after it an mbarrier retry that jumps back (unconditionally) to
        # the start, a span holding the loop and more.
        return [
            "MOV R1, c[0x0][0x28]",
            "FFMA R9, R2, R4, R6",                          # three vector registers, outside
            "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2",
            "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], RZ, !UPT",
            "FFMA R15, R29, R5, -R16",                      # three vector registers, inside
            "FADD R7, R180, R4",                            # a same-bank pair, inside
            "FADD R8, R181, R4",
            "@!P0 BRA 0x20",
            "EXIT",
            "@!P0 BRA 0x90",                                # the retry's spin on itself
            "BRA 0x0",                                      # and its jump back
        ]

    def test_the_loop_is_the_predicated_branch_around_the_mma(self):
        [(name, instructions)] = sr.functions(sass("k", self.kernel())).items()
        self.assertEqual(name, "k")
        self.assertEqual(sr.main_loop(instructions), (0x20, 0x70))
        r = sr.report(instructions)
        self.assertEqual(r, {"instructions": 11, "ffma3r": 2, "loop": 6, "loop_ffma3r": 1,
                             "bank_pairs": 2})  # FFMA R29, R5 (odd, odd) and FADD R180, R4

    def test_a_loop_closed_by_a_branch_with_a_predicate_operand(self):
        code = ["MOV R1, RZ", "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24",
                "FADD R2, R4, R6", "BRA.U !UP0, 0x10", "EXIT", "BRA.U 0x0"]
        [(_, instructions)] = sr.functions(sass("k", code)).items()
        self.assertEqual(sr.main_loop(instructions), (0x10, 0x30))

    def test_no_loop_with_matrix_instructions(self):
        [(_, instructions)] = sr.functions(sass("k", ["FADD R1, R2, R4", "@P0 BRA 0x0"])).items()
        self.assertIsNone(sr.main_loop(instructions))
        self.assertEqual(sr.report(instructions)["bank_pairs"], 0)

    def test_the_program_names_each_kernel_and_refuses_no_match(self):
        text = sass("_Z10fa3_kernelIiEv", self.kernel()) + sass("_Z5otherv", ["EXIT"])
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "kernels.sass")
            with open(path, "w") as f:
                f.write(text)
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(sr.main([path, "--kernels", "fa3_kernel"]), 0)
            self.assertIn("_Z10fa3_kernelIiEv: 11 instructions, FFMA3R 2 (1 in the main loop)",
                          out.getvalue())
            self.assertNotIn("other", out.getvalue())
            err = io.StringIO()
            with redirect_stdout(io.StringIO()), redirect_stderr(err):
                self.assertEqual(sr.main([path, "--kernels", "no_such_kernel"]), 1)
            self.assertIn("no function matching 'no_such_kernel'", err.getvalue())


if __name__ == "__main__":
    unittest.main()
