"""Register operands in a kernel's SASS (the text `cuobjdump -sass` prints), read instruction by
instruction: two counts that tell apart kernels whose instructions are the same but whose
registers are not (bench/gpu/NOTES.md, "Same instructions, 4 to 8% apart").

  FFMA3R      FFMA whose three sources are all vector registers (R...). fa3's softmax forms
              x = S s - m' s with one FFMA per score; s is the same for the whole kernel and
              belongs in a uniform register (UR...) or the constant bank (c[...]). Where ptxas
              put it in a vector register, every one of those FFMA reads three.
  bank pairs  floating-point instructions of the main loop (FFMA, FADD, FMUL, FMNMX, F2FP)
              two or more of whose vector-register sources read from the register file fall
              in the same register bank, counted with two banks (register number mod 2). A
              source is not read from the register file when the instruction before marked
              the same register in the same operand slot .reuse (the operand reuse cache keeps
              it for the next instruction; the marking instruction itself still reads it):
              the model
              that Jia et al. measured on Volta ("Dissecting the NVIDIA Volta GPU Architecture
              via Microbenchmarking", 2018), where such sources are read one after the other.
              Hopper's banks are not documented, and whether these counts cost it time is not
              settled: NOTES has a pair of kernels they tell apart and one they do not.

The main loop is the innermost loop that issues matrix instructions: the shortest conditional
backward branch (a loop's test) whose span holds an HGMMA or HMMA. Unconditional backward
branches are left out: ptxas places the retry of an mbarrier wait after the kernel's end and
jumps back from there into the middle of the code.

  cuobjdump -sass libflashlab.so | python3 sass_registers.py --kernels fa3_kernel
"""
import argparse
import re
import sys

INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNCTION = re.compile(r"Function\s*:\s*(\S+)")
PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")
VECTOR_REGISTER = re.compile(r"^[-|!]*R(\d+)(\.reuse)?")  # RZ does not match: no digits
# BRA, BRA.U, BRA.DIV ..., with an optional predicate operand (`BRA.U !UP0, 0x...`).
BRANCH = re.compile(r"\bBRA(?:\.\w+)*\s+(?:(!?U?P[T0-9]+)\s*,\s*)?(?:`\()?(?:\.L_x_\d+\)?|0x([0-9a-f]+))")
FLOATING_POINT = ("FFMA", "FADD", "FMUL", "FMNMX", "F2FP")


def functions(text):
    """{name: [(address, instruction without its predicate, predicated), ...]} in order."""
    out, name = {}, None
    for line in text.splitlines():
        found = FUNCTION.search(line)
        if found:
            name = found.group(1)
            out[name] = []
            continue
        found = INSTRUCTION.match(line)
        if found and name is not None:
            printed = found.group(2)
            out[name].append((int(found.group(1), 16), PREDICATE.sub("", printed),
                              PREDICATE.match(printed) is not None))
    return out


def opcode(instruction):
    return instruction.split()[0] if instruction else ""


def sources(instruction):
    """The source operands of an instruction whose first operand is its destination."""
    operands = [o.strip() for o in instruction[len(opcode(instruction)):].split(",")]
    return operands[1:]


def vector_sources(instruction):
    """[(operand slot, register number, marked .reuse), ...] of the vector-register sources;
    the slot is the source's place among the instruction's sources (0, 1, 2)."""
    out = []
    for slot, operand in enumerate(sources(instruction)):
        found = VECTOR_REGISTER.match(operand)
        if found:
            out.append((slot, int(found.group(1)), found.group(2) is not None))
    return out


def reads_three_vector_registers(instruction):
    return opcode(instruction).split(".")[0] == "FFMA" and len(vector_sources(instruction)) == 3


def main_loop(instructions):
    """(first, last) address of the main loop, or None where no loop issues matrix instructions."""
    loops = []
    for address, instruction, predicated in instructions:
        found = BRANCH.search(instruction)
        if found is None or found.group(2) is None:
            continue
        conditional = predicated or found.group(1) not in (None, "PT")
        if conditional and int(found.group(2), 16) < address:
            start = int(found.group(2), 16)
            if any(start <= a <= address and opcode(i).split(".")[0] in ("HGMMA", "HMMA")
                   for a, i, _ in instructions):
                loops.append((address - start, start, address))
    if not loops:
        return None
    _, start, end = min(loops)
    return start, end


def bank_pair(instruction, previous="", banks=2):
    """Whether two or more of a floating-point instruction's vector sources that are read from
    the register file (not from the reuse cache that `previous` filled) share a bank."""
    if opcode(instruction).split(".")[0] not in FLOATING_POINT:
        return False
    cached = {(slot, number) for slot, number, reuse in vector_sources(previous) if reuse}
    read = [number % banks for slot, number, _ in vector_sources(instruction)
            if (slot, number) not in cached]
    return any(read.count(bank) >= 2 for bank in set(read))


def report(instructions):
    loop = main_loop(instructions)
    in_loop = [i for a, i, _ in instructions if loop and loop[0] <= a <= loop[1]]
    return {"instructions": len(instructions),
            "ffma3r": sum(reads_three_vector_registers(i) for _, i, _ in instructions),
            "loop": len(in_loop),
            "loop_ffma3r": sum(reads_three_vector_registers(i) for i in in_loop),
            "bank_pairs": sum(bank_pair(i, p) for p, i in zip([""] + in_loop, in_loop))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", nargs="?", help="cuobjdump -sass output (default: standard input)")
    ap.add_argument("--kernels", default="", help="only functions whose name matches this")
    args = ap.parse_args(argv)
    if args.sass:
        with open(args.sass) as f:
            text = f.read()
    else:
        text = sys.stdin.read()
    found = {n: f for n, f in functions(text).items() if re.search(args.kernels, n)}
    if not found:
        print(f"no function matching '{args.kernels}' in the SASS", file=sys.stderr)
        return 1
    for name, instructions in found.items():
        r = report(instructions)
        print(f"{name}: {r['instructions']} instructions, FFMA3R {r['ffma3r']} "
              f"({r['loop_ffma3r']} in the main loop), main loop {r['loop']}, "
              f"bank pairs {r['bank_pairs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
