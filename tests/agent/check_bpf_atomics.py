#!/usr/bin/env python3
"""Every read-modify-write of memory outside the BPF stack in the compiled programs is an atomic
instruction. A map value is shared by every thread of a process (and every CPU): `p->n++` compiles
to a load, an add and a store, and two threads on two CPUs lose one of the updates; an atomic add
or a compare-and-exchange loop does not. A race may not show in a test run on two cores, the
instructions always do.

Along each straight path of `llvm-objdump -d -l` (through conditional jumps and block labels,
ended by a goto, an exit or a new function), a value loaded from [rB + off] (rB not r10, the stack)
and stored back to [rB + off] after arithmetic on it is a lost-update hazard, reported as the
source file:line of the store. Both llvm-objdump formats parse: 14's decimal offsets `(r1 + 8)`
with `<LBB0_3>:` blocks, and the hex `(r2 + 0x0)` of later ones (19 here) with `<L0>:` blocks.
An object fails the check, rather than passing on nothing, when none of its loads or stores
parse, when a memory instruction has a form the parser does not know, or when it has no source
lines (built without -g).

The one exemption: a slot of a per-CPU map, which only the CPU running the program writes. Its
store's source line must carry the marker

    /* vigil: per-cpu map NAME */

and NAME must be a per-CPU map (PERCPU_ARRAY, PERCPU_HASH, LRU_PERCPU_HASH) in the object's BTF;
a marker naming any other map is reported. (A program preempted on its CPU by another run of
itself can still lose a count of a per-CPU slot; the marker accepts that for self-counters.)

usage: check_bpf_atomics.py OBJECT.bpf.o...
       check_bpf_atomics.py --expect-flagged SOURCE OBJECT.bpf.o...
           passes when the check fails on exactly the lines of SOURCE tagged EXPECT-FLAGGED
       check_bpf_atomics.py --self-test DIR
           the parser on the llvm-objdump captures in DIR (tests/agent/objdump) and on snippets
Environment: VIGIL_LLVM_OBJDUMP (default llvm-objdump) and VIGIL_BPFTOOL (default bpftool)."""
import json
import os
import re
import shutil
import subprocess
import sys

NUM = r'(?:0x[0-9a-f]+|\d+)'
MEM = r'\*\([us](\d+) \*\)\((r\d+) ([+-]) (%s)\)' % NUM
LOAD = re.compile(r'^([rw]\d+) = %s$' % MEM)
STORE = re.compile(r'^%s = ([rw]\d+|-?%s)$' % (MEM, NUM))
ATOMIC = re.compile(r'^lock %s ' % MEM)
ANY_MEM = re.compile(r'\*\([us]\d+ \*\)')
ALU = re.compile(r'^([rw]\d+) (?:[-+*/%&|^]|<<|>>|s>>|s/|s%)?= (.+)$')
# a move of a register: plain, sign-extending (r1 = (s32)r1), negated or byte-swapped
MOVE = re.compile(r'^(?:\([su]\d+\)|-|(?:be|le|bswap)\d+ )?([rw]\d+)$')
LINE = re.compile(r'^; (/\S+):(\d+)')
FUNCTION = re.compile(r'^[0-9a-f]+ <(.+)>:$')
BLOCK = re.compile(r'^(?:[0-9a-f]+ <LBB\d+_\d+>|<L\d+>):$')
INSN = re.compile(r'^\s*[0-9a-f]+:\s+(.*)$')
MARKER = re.compile(r'vigil: per-cpu map (\w+)')
PERCPU_TYPES = {5: 'PERCPU_HASH', 6: 'PERCPU_ARRAY', 10: 'LRU_PERCPU_HASH'}


def reg(name):
    """w3 and r3 are the same register."""
    return 'r' + name[1:]


def slot(size, base, sign, off):
    return (base, int(off, 0) * (-1 if sign == '-' else 1), size)


def parse(text):
    """Hazards [(file:line or None, insn)] of one disassembly, and what was parsed of it."""
    stats = {'loads': 0, 'stores': 0, 'lines': 0, 'unknown': []}
    found, line = [], None
    tainted = {}  # register -> the loads (base, off, size) its value derives from, on this path

    def moved(base):
        """base points elsewhere: loads through its old value no longer match a store through it."""
        for r in tainted:
            tainted[r] = {t for t in tainted[r] if t[0] != base}

    def redefine(dst):
        tainted.pop(dst, None)
        moved(dst)

    for raw in text.splitlines():
        if (m := LINE.match(raw)):
            line = '%s:%s' % (m.group(1), m.group(2))
            stats['lines'] += 1
            continue
        m = INSN.match(raw)
        if not m:
            # A function (or a section) starts clean; a block label continues the path falling into it.
            if (FUNCTION.match(raw) and not BLOCK.match(raw)) or raw.startswith('Disassembly of section'):
                tainted.clear()
                line = None
            continue
        insn = m.group(1).strip()
        # A conditional jump keeps the fall-through path's values (a floor such as
        # `*v = *v > d ? *v - d : 0` branches between its load and its store); a goto or exit ends
        # the path; a call clobbers r0-r5 and keeps r6-r9.
        if insn.startswith(('goto', 'exit')):
            tainted.clear()
            continue
        if insn.startswith('call'):
            for i in range(6):
                redefine('r%d' % i)
            continue
        if insn.startswith(('if ', 'may_goto')) or ATOMIC.match(insn):
            continue
        if (m := LOAD.match(insn)):
            stats['loads'] += 1
            dst, where = reg(m.group(1)), slot(*m.group(2, 3, 4, 5))
            redefine(dst)
            if where[0] not in ('r10', dst):  # through itself (r1 = *(r1 + 8)): the address is gone
                tainted[dst] = {where}
            continue
        if (m := STORE.match(insn)):
            stats['stores'] += 1
            where, src = slot(*m.group(1, 2, 3, 4)), m.group(5)
            if src[0] in 'rw' and where in tainted.get(reg(src), ()):
                found.append((line, insn))
            continue
        if ANY_MEM.search(insn):
            stats['unknown'].append(insn)
            continue
        if (m := ALU.match(insn)):
            dst, rhs = reg(m.group(1)), m.group(2)
            src = MOVE.match(rhs)
            source = set(tainted.get(reg(src.group(1)), ())) if src else set()
            if insn.split()[1] == '=':  # a move or a constant: dst takes the source's taint
                redefine(dst)
                tainted[dst] = source
            else:
                own = tainted.pop(dst, set())
                moved(dst)
                tainted[dst] = own | source
    return found, stats


def tool(env, name):
    path = shutil.which(os.environ.get(env, name),
                        path=os.environ.get('PATH', '') + ':/usr/sbin:/usr/local/sbin')
    if not path:
        sys.exit('FAIL: %s not found (set %s)' % (name, env))
    return path


def percpu_maps(obj):
    """{name: type} of the object's per-CPU maps, from the BTF of its .maps section."""
    out = subprocess.run([tool('VIGIL_BPFTOOL', 'bpftool'), '-j', 'btf', 'dump', 'file', obj],
                         capture_output=True, text=True, check=True).stdout
    types = {t['id']: t for t in json.loads(out)['types']}
    maps = {}
    for sec in types.values():
        if sec['kind'] != 'DATASEC' or sec['name'] != '.maps':
            continue
        for v in sec['vars']:
            var = types[v['type_id']]
            members = {m['name']: m['type_id'] for m in types[var['type_id']].get('members', [])}
            if 'type' in members:  # __uint(type, N) is a pointer to int[N]
                n = types[types[members['type']]['type_id']]['nr_elems']
                if n in PERCPU_TYPES:
                    maps[var['name']] = PERCPU_TYPES[n]
    return maps


def source_line(where):
    path, n = where.rsplit(':', 1)
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    return lines[int(n) - 1] if int(n) <= len(lines) else None


def check(obj):
    """Failure messages for one object; prints what was parsed."""
    found, stats = parse(subprocess.run([tool('VIGIL_LLVM_OBJDUMP', 'llvm-objdump'), '-d', '-l',
                                         '--no-show-raw-insn', obj], capture_output=True, text=True, check=True).stdout)
    print('%s: %d loads, %d stores, %d source lines parsed' % (obj, stats['loads'], stats['stores'], stats['lines']))
    fails = []
    if stats['unknown']:
        fails.append('%s: %d memory instructions of a form this checker does not read, such as: %s'
                     % (obj, len(stats['unknown']), '; '.join(stats['unknown'][:3])))
    if not stats['loads'] or not stats['stores']:
        fails.append('%s: no loads or no stores parsed: an llvm-objdump format this checker does not read?' % obj)
    if not stats['lines']:
        fails.append('%s: no source lines in the disassembly (built without -g?)' % obj)
    percpu = None
    for where, insn in found:
        src = source_line(where) if where else None
        marker = MARKER.search(src) if src else None
        if marker:
            percpu = percpu_maps(obj) if percpu is None else percpu
            if marker.group(1) in percpu:
                continue
            fails.append('%s: marker at %s names map %s, not a per-CPU map of this object: %s'
                         % (obj, where, marker.group(1), insn))
        else:
            fails.append('%s: non-atomic read-modify-write of shared memory at %s: %s' % (obj, where or '?', insn))
    return fails


def main(objs):
    if not objs:
        print('FAIL: no BPF objects given (an empty VIGIL_BPF_OBJECTS?)')
        return 1
    fails = []
    for obj in objs:
        fails += check(obj)
    for f in fails:
        print('FAIL: ' + f)
    print('checked %d objects: %d failures' % (len(objs), len(fails)))
    return 1 if fails else 0


def expect_flagged(source, objs):
    """The checker, run as a program, must fail on exactly SOURCE's lines tagged EXPECT-FLAGGED."""
    source = os.path.realpath(source)
    with open(source) as f:
        expected = {'%s:%d' % (source, i) for i, l in enumerate(f.read().splitlines(), 1) if 'EXPECT-FLAGGED' in l}
    if not expected:
        print('FAIL: no line of %s is tagged EXPECT-FLAGGED' % source)
        return 1
    run = subprocess.run([sys.executable, os.path.abspath(__file__)] + objs, capture_output=True, text=True)
    print(run.stdout + run.stderr, end='')
    flagged = set()
    for m in re.finditer(r'^FAIL: .* at (/\S+:\d+)[:\s]', run.stdout, re.M):
        path, n = m.group(1).rsplit(':', 1)
        flagged.add('%s:%s' % (os.path.realpath(path), n))
    ok = run.returncode == 1 and flagged == expected
    for w in sorted(expected - flagged):
        print('FAIL: not flagged: %s' % w)
    for w in sorted(flagged - expected):
        print('FAIL: flagged but not tagged: %s' % w)
    if run.returncode != 1:
        print('FAIL: the check exited %d, not 1' % run.returncode)
    print('expect-flagged: %s' % ('ok, %d lines flagged' % len(expected) if ok else 'FAILED'))
    return 0 if ok else 1


# Hand-written snippets in the hex format: (text, the lines that must be flagged).
SNIPPETS = [
    # `*v = *v > d ? *v - d : 0`: the store is behind a block label, on the path through it
    ('0000000000000000 <floor>:\n; /s.c:10\n       0:\tr1 = *(u64 *)(r0 + 0x8)\n       1:\tr2 = 0x0\n'
     '       2:\tif r1 < 0x10 goto +0x2 <L0>\n       3:\tr2 = r1\n       4:\tr2 += -0x10\n<L0>:\n; /s.c:11\n'
     '       5:\t*(u64 *)(r0 + 0x8) = r2\n       6:\texit\n', ['/s.c:11']),
    # a new function starts a new path; the stack (r10) is private; another offset is another slot
    ('0000000000000000 <a>:\n; /s.c:20\n       0:\tr1 = *(u64 *)(r6 + 0x8)\n'
     '0000000000000008 <b>:\n; /s.c:30\n       1:\t*(u64 *)(r6 + 0x8) = r1\n'
     '       2:\tr2 = *(u64 *)(r10 - 0x8)\n       3:\tr2 += 0x1\n       4:\t*(u64 *)(r10 - 0x8) = r2\n'
     '       5:\tr3 = *(u32 *)(r6 + 0x4)\n       6:\tw3 += 0x1\n       7:\t*(u32 *)(r6 + 0x0) = w3\n', []),
    # a sign-extending move carries the loaded value; a redefined base points elsewhere
    ('0000000000000000 <c>:\n; /s.c:40\n       0:\tr1 = *(u32 *)(r6 + 0x4)\n       1:\tr2 = (s32)r1\n'
     '       2:\t*(u32 *)(r6 + 0x4) = w2\n       3:\tr4 = *(u64 *)(r7 + 0x0)\n       4:\tr7 = *(u64 *)(r7 + 0x8)\n'
     '       5:\t*(u64 *)(r7 + 0x0) = r4\n', ['/s.c:40']),
]


def self_test(fixtures):
    """The parser on real captures of both formats (all must agree) and on the snippets above."""
    errors, results = [], {}
    names = sorted(n for n in os.listdir(fixtures) if n.endswith('.txt'))
    if not names:
        errors.append('no captures (*.txt) in %s' % fixtures)
    for name in names:
        with open(os.path.join(fixtures, name)) as f:
            found, stats = parse(f.read())
        lines = sorted(os.path.basename(w) for w, _ in found)
        results[name] = (tuple(lines), stats['loads'], stats['stores'])
        print('%s: flagged %s; %d loads, %d stores' % (name, ' '.join(lines), stats['loads'], stats['stores']))
        if stats['unknown'] or not stats['lines']:
            errors.append('%s: %d instructions of unknown form (%s), %d source lines'
                          % (name, len(stats['unknown']), '; '.join(stats['unknown'][:3]), stats['lines']))
        # the fixture's three plain updates (README.md there), not the atomic add at 35
        if lines != ['racy_counter.bpf.c:34', 'racy_counter.bpf.c:37', 'racy_counter.bpf.c:41']:
            errors.append('%s: flagged %s' % (name, lines))
    if len(set(results.values())) > 1:
        errors.append('the formats disagree: %s' % results)
    for text, want in SNIPPETS:
        got = [w for w, _ in parse(text)[0]]
        if got != want:
            errors.append('snippet %s: flagged %s, want %s' % (text.split('\n')[0], got, want))
    unknown = parse('       0:\tr1 = *(u64 *)(r1 +0x8)\n')[1]['unknown']
    if unknown != ['r1 = *(u64 *)(r1 +0x8)']:
        errors.append('an unknown memory form went unreported: %s' % unknown)
    empty = subprocess.run([sys.executable, os.path.abspath(__file__)], capture_output=True, text=True)
    if empty.returncode == 0 or 'no BPF objects' not in empty.stdout:
        errors.append('no objects: exit %d, %r' % (empty.returncode, empty.stdout))
    for e in errors:
        print('FAIL: ' + e)
    print('self-test: %d captures, %d snippets, %s' % (len(names), len(SNIPPETS), 'FAILED' if errors else 'ok'))
    return 1 if errors else 0


if __name__ == '__main__':
    args = sys.argv[1:]
    if args[:1] == ['--self-test'] and len(args) == 2:
        sys.exit(self_test(args[1]))
    if args[:1] == ['--expect-flagged'] and len(args) >= 3:
        sys.exit(expect_flagged(args[1], args[2:]))
    if args[:1] and args[0].startswith('--'):
        sys.exit(__doc__)
    sys.exit(main(args))
