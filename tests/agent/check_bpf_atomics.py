#!/usr/bin/env python3
"""Every read-modify-write of memory outside the BPF stack in the compiled programs is an atomic
instruction. A map value is shared by every thread of a process (and every CPU): `p->n++` compiles
to a load, an add and a store, and two threads on two CPUs lose one of the updates; an atomic add
or a compare-and-exchange loop does not. A race may not show in a test run on two cores, the
instructions always do.

Along each straight path of `llvm-objdump -d -l` (through conditional jumps, ended by a goto or
exit), a value loaded from [rB + off] (rB not r10, the stack) and stored back to [rB + off] after
arithmetic on it is a lost-update hazard. Per-CPU slots
are exempt where the source line says so ("per-CPU" in a comment on that line): only one CPU
writes them, with preemption off.
usage: check_bpf_atomics.py OBJECT.bpf.o..."""
import re
import subprocess
import sys

INSN = re.compile(r'^\s*[0-9a-f]+:\s+(?:[0-9a-f]{2} ){8}\s*(.*)$')
LOAD = re.compile(r'^(r\d+|w\d+) = \*\(u(\d+) \*\)\((r\d+) ([+-] \d+)\)$')
STORE = re.compile(r'^\*\(u(\d+) \*\)\((r\d+) ([+-] \d+)\) = (r\d+|w\d+)$')
ALU = re.compile(r'^(r\d+|w\d+) (?:[-+*/%&|^]|<<|>>|s>>)?= (.+)$')
LINE = re.compile(r'^; (/\S+):(\d+)')


def reg(name):
    """w3 and r3 are the same register."""
    return 'r' + name[1:]


def hazards(obj):
    text = subprocess.run(['llvm-objdump', '-d', '-l', '--no-show-raw-insn', obj], capture_output=True,
                          text=True, check=True).stdout
    found, line = [], None
    tainted = {}  # register -> the loads (base, off, size) its value derives from, on this path
    for raw in text.splitlines():
        m = LINE.match(raw)
        if m:
            line = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r'^\s*[0-9a-f]+:\s+(.*)$', raw)
        if not m:
            # A new function starts clean; a jump target (LBB) continues the path that falls into it.
            if raw.endswith('>:') and '<LBB' not in raw:
                tainted.clear()
            continue
        insn = m.group(1).strip()
        # A conditional jump keeps the fall-through path's values (a floor such as
        # `*v = *v > d ? *v - d : 0` branches between its load and its store); a goto or exit ends
        # the path; a call clobbers r0-r5 and keeps r6-r9.
        if insn.startswith(('goto', 'exit')):
            tainted.clear()
            continue
        if insn.startswith('call'):
            for r in ['r%d' % i for i in range(6)]:
                tainted.pop(r, None)
            continue
        if insn.startswith('if '):
            continue
        if (m := LOAD.match(insn)):
            dst, size, base, off = reg(m.group(1)), m.group(2), m.group(3), m.group(4)
            tainted.pop(dst, None)
            if base != 'r10':
                tainted[dst] = {(base, off, size)}
            continue
        if (m := STORE.match(insn)):
            size, base, off, src = m.group(1), m.group(2), m.group(3), reg(m.group(4))
            if (base, off, size) in tainted.get(src, ()):
                found.append((line, insn))
            continue
        if (m := ALU.match(insn)):
            dst, rhs = reg(m.group(1)), m.group(2)
            src = re.fullmatch(r'[rw]\d+', rhs)
            source = tainted.get(reg(rhs), set()) if src else set()
            if insn.split()[1] == '=':  # a move or a constant: dst takes the source's taint
                tainted[dst] = set(source)
            else:
                tainted[dst] = tainted.get(dst, set()) | source
            # a redefined base register points elsewhere: loads through its old value no longer match
            for r in tainted:
                if r != dst:
                    tainted[r] = {t for t in tainted[r] if t[0] != dst}
    return found


def exempt(line):
    if not line:
        return False
    path, n = line
    try:
        with open(path) as f:
            return 'per-CPU' in f.read().splitlines()[n - 1]
    except OSError:
        return False


def main():
    bad = 0
    for obj in sys.argv[1:]:
        for line, insn in hazards(obj):
            if exempt(line):
                continue
            bad += 1
            where = '%s:%d' % line if line else '?'
            print('FAIL: %s: non-atomic read-modify-write of shared memory at %s: %s' % (obj, where, insn))
    print('checked %d objects: %d non-atomic updates' % (len(sys.argv) - 1, bad))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
