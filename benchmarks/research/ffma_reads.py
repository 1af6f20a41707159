"""How many FFMAs read all three source registers from the register file.

    python benchmarks/research/ffma_reads.py SASS [--kernel REGEX]

SASS is the text of `cuobjdump -sass` (the built extension, a cubin, or a
library such as libcublasLt) or of `nvdisasm -c`.  For every kernel (whose
name matches REGEX) it prints the FFMA count of its k-loop (the backward
branch whose body holds the most FFMAs and no global store) and the share of
those FFMAs that read 3, 2 and 1 registers, and the share whose reads
include two registers of one bank (register number mod 2).

The model (docs/log/ladder.md, round 6): each source operand slot has a
`.reuse` cache holding one register per bank (register number mod 2); an
operand flagged `.reuse` is kept, and the next instruction that names the
same register in the same slot reads it from there.  An FFMA that still
reads three registers issues in two cycles (benchmarks/research/micro/
ffma_operands.cu measures that), so the three-read share is the issue time
such a loop loses.  Static counts only: it says nothing of how often each
instruction runs.
"""
import argparse
import collections
import re
import sys

_ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_REG = re.compile(r"-?\|?(R\d+)\|?(\.reuse)?")
_BRANCH = re.compile(r"BRA[^`]*`\(\.(L_x_\d+)\)")
_BRANCH_ABS = re.compile(r"BRA[^;]*?0x([0-9a-f]+)")


def kernels(text):
    """(name, body) per kernel, for nvdisasm (.text.NAME:) and cuobjdump (Function : NAME) output."""
    parts = re.split(r"\n(?=\.text\.|\s*Function : )", text)
    for part in parts:
        head = part.lstrip().split("\n", 1)[0]
        if head.startswith(".text."):
            yield head[len(".text."):].rstrip(":"), part
        elif head.startswith("Function : "):
            yield head[len("Function : "):].strip(), part


def instructions(body):
    """(address, label-or-None, opcode, operands) in order."""
    out, label = [], None
    for line in body.split("\n"):
        m = re.match(r"\s*\.(L_x_\d+):", line)
        if m:
            label = m.group(1)
            continue
        m = _ADDR.search(line)
        if not m:
            continue
        text = re.sub(r"^@!?U?P\w+\s+", "", m.group(2).strip())
        op, _, rest = text.partition(" ")
        out.append((int(m.group(1), 16), label, op, text, [x.strip() for x in rest.split(",")]))
        label = None
    return out


def k_loop(ins):
    """The instructions of the loop with the most FFMAs and no global store."""
    where = {lab: a for a, lab, *_ in ins if lab}
    best = []
    for a, _, op, text, _ in ins:
        if not op.startswith("BRA"):
            continue
        m = _BRANCH.search(text)
        target = where.get(m.group(1)) if m else None
        if target is None:
            m = _BRANCH_ABS.search(text)
            target = int(m.group(1), 16) if m else None
        if target is None or target >= a:
            continue
        body = [x for x in ins if target <= x[0] <= a]
        if any(x[2].startswith("STG") for x in body):
            continue
        if sum(x[2].startswith("FFMA") for x in body) > sum(x[2].startswith("FFMA") for x in best):
            best = body
    return best


def read_counts(ins, same_bank=False):
    """Per instruction, how many source registers it reads from the file (or,
    with same_bank, whether two of those reads fall in one bank: register
    number mod 2)."""
    cache = [[None, None] for _ in range(3)]
    out = []
    for _, _, op, _, ops in ins:
        banks = [0, 0]
        for slot, operand in enumerate(ops[1:4]):
            m = _REG.match(operand)
            if not m or m.group(1) == "RZ":
                continue
            r = int(m.group(1)[1:])
            if cache[slot][r % 2] != r:
                banks[r % 2] += 1
            cache[slot][r % 2] = r if m.group(2) else None
        out.append(max(banks) > 1 if same_bank else sum(banks))
    return out


def same_bank_share(ins):
    """Share of the FFMAs with two register-file reads in one bank (these
    also issue in two cycles; three reads always include such a pair)."""
    flags = [f for x, f in zip(ins, read_counts(ins, same_bank=True)) if x[2].startswith("FFMA")]
    return sum(flags) / len(flags) if flags else 0.0


def reads(ins):
    """Histogram: FFMAs by the number of source registers read from the file."""
    return collections.Counter(n for x, n in zip(ins, read_counts(ins)) if x[2].startswith("FFMA"))


def sections(ins, min_ffma=500):
    """The k-loop cut at its branches: (FFMA count, histogram) of every piece
    with at least min_ffma FFMAs (e.g. a kernel whose k-tile loop holds a
    fast-path and an edge-path copy of the k-tile)."""
    out, piece = [], []
    for x, n in zip(ins, read_counts(ins)):
        piece.append((x[2], n))
        if x[2].startswith("BRA"):
            out.append(piece)
            piece = []
    out.append(piece)
    res = []
    for piece in out:
        hist = collections.Counter(n for op, n in piece if op.startswith("FFMA"))
        if sum(hist.values()) >= min_ffma:
            res.append((sum(hist.values()), hist))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("--kernel", default="", help="regex on the (mangled) kernel name")
    ap.add_argument("--sections", action="store_true",
                    help="also the k-loop's pieces between branches that hold >= 500 FFMAs")
    a = ap.parse_args(argv)
    text = open(a.sass).read() if a.sass != "-" else sys.stdin.read()
    for name, body in kernels(text):
        if a.kernel and not re.search(a.kernel, name):
            continue
        loop = k_loop(instructions(body))
        hist = reads(loop)
        total = sum(hist.values())
        if total == 0:
            continue
        share = "  ".join(f"{n} reads {hist[n] / total:6.1%}" for n in (3, 2, 1))
        print(f"{total:6d} FFMA in the k-loop  {share}  same bank {same_bank_share(loop):6.1%}  {name}")
        if a.sections:
            for count, h in sections(loop):
                share = "  ".join(f"{n} reads {h[n] / count:6.1%}" for n in (3, 2, 1))
                print(f"    {count:6d} FFMA in a piece  {share}")


if __name__ == "__main__":
    main()
