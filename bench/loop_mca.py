#!/usr/bin/env python3
"""Models the innermost loops of a compiled function on several CPUs with llvm-mca.

The CPUs this project runs on differ (AMD Zen 4, Intel Sapphire Rapids) and a session can time
only the one it has; llvm-mca's scheduling models give the other's port pressure and cycles per
iteration for the very instructions that ship. The models are approximate (LLVM 16 has no
Zen 4 model of its own and models znver4 as Zen 3 plus AVX-512; sapphirerapids as Ice Lake's
ports), so compare loops with each other on one model, not cycles with a stopwatch.

Reads a object file or shared library as built (objdump), finds the function whose demangled
name contains the given text, and for each innermost loop (a backward branch whose range holds
no other backward branch) prints the cycles per iteration and the busiest port on each CPU.

usage: bench/loop_mca.py OBJECT FUNCTION [--cpus znver4,sapphirerapids] [--whole] [--asm]
                        [--select MNEMONIC=COUNT]
  --whole   model the function's whole body as one block (for loop-free callees)
  --select  only loops with exactly COUNT instructions MNEMONIC (e.g. vpdpbusd=1 picks the
            one-token loop among a kernel's token-count instantiations)
  --asm     print the instructions modeled
"""
import argparse
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")
SYMBOL = re.compile(r"^[0-9a-f]+ <(.*)>:$")
JUMP = re.compile(r"^(j[a-z]+)\s+([0-9a-f]+)\b")


def functions(path):
    """{demangled name: [(address, instruction text)]} of every function in path."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", path],
                         check=True, capture_output=True, text=True).stdout
    funcs, current = {}, None
    for line in out.splitlines():
        m = SYMBOL.match(line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            continue
        m = LINE.match(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2).split("#")[0].strip()))
    return funcs


def innermost_loops(insns):
    """[(start, end)] address ranges of loops that contain no other loop."""
    loops = []
    for addr, text in insns:
        m = JUMP.match(text)
        if m and int(m.group(2), 16) <= addr:
            loops.append((int(m.group(2), 16), addr))
    return [(s, e) for s, e in loops
            if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in loops)]


def mca_input(insns):
    """The instructions as llvm-mca reads them: no branches, nops or calls (their targets are
    addresses objdump printed, not labels), AT&T syntax as objdump writes it."""
    lines = []
    for _, text in insns:
        op = text.split()[0]
        if op.startswith("j") or op in ("call", "ret", "endbr64", "leave") or "nop" in op:
            continue
        lines.append(re.sub(r"<[^>]*>", "", text))
    return "\n".join(lines) + "\n"


def model(asm, cpu, mca):
    res = subprocess.run([mca, "-mtriple=x86_64-unknown-linux-gnu", f"-mcpu={cpu}", "-iterations=200",
                          "-resource-pressure=true", "-instruction-info=false"],
                         input=asm, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"llvm-mca ({cpu}) failed:\n{res.stderr}")
    text = res.stdout
    iterations = int(re.search(r"^Iterations:\s+(\d+)", text, re.M).group(1))
    cycles = int(re.search(r"^Total Cycles:\s+(\d+)", text, re.M).group(1))
    uops = int(re.search(r"^Total uOps:\s+(\d+)", text, re.M).group(1))
    rthroughput = float(re.search(r"^Block RThroughput:\s+([\d.]+)", text, re.M).group(1))
    # The resource-pressure table: header of port names, then the per-iteration pressure row.
    block = text.split("Resource pressure per iteration:", 1)[1].splitlines()
    names = re.findall(r"\[([\d.]+)\]", block[1])
    values = block[2].split()
    legend = dict(re.findall(r"^\[([\d.]+)\]\s+-\s+(\S+)", text, re.M))
    busiest = max(((float(v), legend.get(n, n)) for n, v in zip(names, values) if v != "-"), default=(0, "-"))
    return cycles / iterations, uops / iterations, rthroughput, busiest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("object")
    ap.add_argument("function")
    ap.add_argument("--cpus", default="znver4,sapphirerapids")
    ap.add_argument("--whole", action="store_true")
    ap.add_argument("--asm", action="store_true")
    ap.add_argument("--select", help="MNEMONIC=COUNT")
    args = ap.parse_args()
    mca = shutil.which("llvm-mca-16") or shutil.which("llvm-mca")
    if mca is None:
        raise SystemExit("loop_mca: llvm-mca not found (Debian: apt-get install llvm-16)")
    funcs = {n: i for n, i in functions(args.object).items() if args.function in n and not n.endswith("@plt")}
    if not funcs:
        raise SystemExit(f"loop_mca: no function matching '{args.function}' in {args.object}")
    for name, insns in funcs.items():
        print(f"{name[:150]}")
        blocks = [("whole", insns)] if args.whole else [
            (f"loop {s:#x}-{e:#x}", [i for i in insns if s <= i[0] <= e]) for s, e in innermost_loops(insns)]
        if args.select:
            mnemonic, count = args.select.split("=")
            blocks = [(label, body) for label, body in blocks
                      if sum(1 for _, t in body if t.split()[0] == mnemonic) == int(count)]
        if not blocks:
            print("  no loop (try --whole)")
        for label, body in blocks:
            asm = mca_input(body)
            cells = []
            for cpu in args.cpus.split(","):
                per_iter, uops, rtp, (pressure, port) = model(asm, cpu, mca)
                cells.append(f"{cpu}: {per_iter:.2f} cyc/iter, {uops:.1f} uops, "
                             f"bound {rtp:.2f}, busiest {port} {pressure:.2f}")
            print(f"  {label} ({asm.count(chr(10))} insns)\n    " + "\n    ".join(cells))
            if args.asm:
                print("    | " + asm.rstrip().replace("\n", "\n    | "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
