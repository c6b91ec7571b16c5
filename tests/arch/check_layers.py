#!/usr/bin/env python3
"""Includes point down: no file of the worker or the agent includes a file of a higher layer.

The worker's build enforces its layers (each is a library with an include root of its own,
cmake/Layers.cmake; tests/arch/check_build_layers.py shows a wrong include failing to build);
this check also covers what the build cannot see: an include found next to the including file
or through a relative path, and the agent, which is one library. Each tree's layers are listed
below, lowest first. A file may include its own group and any lower rank; groups of one rank
(siblings, e.g. the CPU and CUDA backends) may not include each other. Every source file must
belong to a layer, so a new directory has to be placed here.

Beyond the order, a few includes that rank would allow are refused (FORBIDDEN below): the
worker's engine includes no concrete backend (it is handed one; backend/select builds it), and
its CLI (commands/) no kernels (a verb runs them through a backend); the agent's correlate/ no
concrete collector (it reads the probes' snapshots).

Below all of them, and free to include: bpf/ (the structs shared with the BPF programs and the
generated skeletons), common/, generated headers (vigil/version.h) and system headers. An
include is resolved as the compiler does: next to the including file, then from the tree's root;
what is found under neither is not the tree's.

usage: check_layers.py worker|agent [ROOT]   (default ROOT: the tree next to tests/)
       check_layers.py worker|agent ROOT --expect-flagged FIXTURE=PLACE...
The second form checks each FIXTURE (tests/arch/violations/) as if it were the file PLACE of the
tree, resolving its includes there, and passes only when the lines flagged are exactly those
tagged "// layer violation": the check itself must be able to say no.
"""
import fnmatch
import os
import re
import sys

# (rank, group, path prefixes relative to the tree); a prefix ending in "/" is a directory, the
# longest matching prefix decides.
TREES = {
    "worker": [
        (0, "base", ["base/"]),                # GGML types and views, USDT probes
        (1, "kernels/cpu", ["kernels/cpu/"]),  # CPU kernels
        (1, "kernels/cuda", ["kernels/cuda/"]),  # CUDA kernels
        (2, "model", ["model/"]),              # GGUF, llama model and architecture, tokenizer
        (3, "comm", ["comm/"]),                # collectives, column-parallel matmul
        (4, "backend", ["backend/"]),          # the seam: ForwardBackend, BatchToken, allocator
        (5, "backend/cpu", ["backend/cpu/"]),
        (5, "backend/cuda", ["backend/cuda/"]),
        (6, "backend/select", ["backend/select/"]),
        (7, "engine", ["engine/"]),
        (8, "server", ["server/"]),
        (9, "commands", ["commands/"]),
        (10, "main", ["main.cpp"]),
    ],
    "agent": [
        (0, "stats", ["stats/"]),              # the agent's own bookkeeping, written by every layer above
        (1, "discovery", ["discovery/"]),      # processes: labels, liveness, the libraries they map
        (2, "probes", ["probes/"]),            # one loader per BPF program (bpf/*.bpf.c) and helpers
        (3, "collectors", ["collectors/"]),    # read the probes' maps at scrape time; metric/label helpers
        (4, "correlate", ["correlate/"]),      # joins two probe sets (TCP state and failed collectives)
        (5, "config", ["config/"]),            # read by the sets and the agent only
        (6, "sets", ["sets/"]),                # each probe set: its probe, its collectors; the registry
        (7, "export", ["export/"]),            # the HTTP endpoint
        (8, "agent", ["agent.h", "agent.cpp"]),  # owns the sets, runs the loop
        (9, "main", ["main.cpp", "preflight.h", "preflight.cpp", "libbpf_log.h", "libbpf_log.cpp"]),
    ],
}
# (tree, including group, groups it may not include although they rank lower, why)
FORBIDDEN = [
    ("worker", "engine", ["backend/cpu", "backend/cuda", "backend/select"],
     "the engine is handed its ForwardBackend; backend/select builds it"),
    ("worker", "commands", ["kernels/cpu", "kernels/cuda"], "a verb runs kernels only through a backend"),
    # A pattern (with "*") names files rather than a group: the metric and label helpers of
    # collectors/ stay open to correlate/.
    ("agent", "correlate", ["collectors/*_collector.h"],
     "the correlator reads the probes' snapshots, not a collector"),
]
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(layers, rel):
    """Index in `layers` of the tree-relative path `rel` (longest prefix wins), or None."""
    best, best_len = None, -1
    for i, (_, _, prefixes) in enumerate(layers):
        for p in prefixes:
            hit = rel == p or (p.endswith("/") and rel.startswith(p))
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def resolve(root, including, delim, name):
    """Tree-relative path the include names, or None when it is not a file of the tree."""
    candidates = [os.path.join(root, name)]
    if delim == '"':
        candidates.insert(0, os.path.join(os.path.dirname(including), name))
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(c) and os.path.commonpath([c, root]) == root:
            return os.path.relpath(c, root)
    return None


def file_problems(tree, layers, root, rel, path):
    """(line, problem) of the file `path`, placed at `rel` in the tree; line 0: it is in no layer."""
    own = layer_of(layers, rel)
    if own is None:
        return [(0, "%s/%s: in no layer (place it in TREES of %s)" % (tree, rel, os.path.basename(__file__)))]
    problems = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = resolve(root, os.path.join(root, rel), m.group(1), m.group(2))
            theirs = None if target is None else layer_of(layers, target)
            if theirs is None or theirs == own:
                continue
            mine_rank, mine_group, _ = layers[own]
            their_rank, their_group, _ = layers[theirs]
            forbidden = [why for t, group, theirs_, why in FORBIDDEN
                         if t == tree and group == mine_group
                         and any(fnmatch.fnmatch(target, p) if "*" in p else their_group == p for p in theirs_)]
            if their_rank > mine_rank:
                why = "a higher layer"
            elif their_rank == mine_rank:
                why = "a sibling layer"
            elif forbidden:
                why = "forbidden: " + forbidden[0]
            else:
                continue
            problems.append((lineno, "%s/%s:%d: %s includes %s/%s, %s (%s)" % (
                tree, rel, lineno, mine_group, tree, target, their_group, why)))
    return problems


def check(tree, root):
    layers = TREES[tree]
    root = os.path.normpath(os.path.abspath(root))
    problems = []
    files = 0
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(top, name)
            files += 1
            problems += [p for _, p in file_problems(tree, layers, root, os.path.relpath(path, root), path)]
    return files, problems


def expect_flagged(tree, root, specs):
    """Each FIXTURE=PLACE: the lines flagged are exactly the tagged ones. Returns the failures."""
    root = os.path.normpath(os.path.abspath(root))
    failures = 0
    for spec in specs:
        fixture, _, place = spec.partition("=")
        with open(fixture, encoding="utf-8") as f:
            tagged = [n for n, line in enumerate(f, 1) if "// layer violation" in line]
        found = file_problems(tree, TREES[tree], root, place, fixture)
        flagged = [n for n, _ in found]
        for _, p in found:
            print("  " + p)
        if flagged == tagged:
            print("ok: %s as %s/%s: flagged lines %s, the tagged ones" % (
                os.path.basename(fixture), tree, place, flagged or "none"))
        else:
            print("FAIL: %s as %s/%s: flagged lines %s, tagged %s" % (
                os.path.basename(fixture), tree, place, flagged or "none", tagged or "none"))
            failures += 1
    return failures


def order(tree):
    ranks = {}
    for rank, group, _ in TREES[tree]:
        ranks.setdefault(rank, []).append(group)
    return " < ".join(" | ".join(groups) for _, groups in sorted(ranks.items()))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in TREES:
        print(__doc__)
        return 2
    tree = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", tree)
    if len(sys.argv) > 3:
        if sys.argv[3] != "--expect-flagged" or len(sys.argv) == 4:
            print(__doc__)
            return 2
        return 1 if expect_flagged(tree, root, sys.argv[4:]) else 0
    files, problems = check(tree, root)
    if files == 0:
        print("FAIL: no sources under %s" % root)
        return 1
    for p in problems:
        print(p)
    if problems:
        print("FAIL: %d problem(s) with the %s's layer order (%s)" % (len(problems), tree, order(tree)))
        return 1
    print("ok: %d files of the %s, every include at or below its layer (%s)" % (files, tree, order(tree)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
