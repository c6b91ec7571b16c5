#!/usr/bin/env python3
"""Every BPF map has one owner: only agent/probes/ writes a map or walks one.

Each BPF program's maps are read into snapshots, and trimmed for exited processes, by one owner
next to its loader in agent/probes/ (docs/architecture.md, "The agent's data path"). Collectors,
the correlator and the sets get snapshots through reader interfaces; a map write, delete or key
walk anywhere else is a second owner. Flagged outside agent/probes/: bpf_map_update_elem,
bpf_map_delete_elem, bpf_map_get_next_key and the walks of probes/bpf_util.h (map_keys,
map_entries). Comments are not code: a mention in one is not flagged.

usage: check_map_owners.py [AGENT_ROOT]   (default: the agent/ next to tests/)
       check_map_owners.py AGENT_ROOT --expect-flagged FIXTURE=PLACE...
The second form checks each FIXTURE (tests/arch/violations/) as if it were the file PLACE of the
tree and passes only when the lines flagged are exactly those tagged "// map owner violation".
"""
import os
import re
import sys

CALLS = re.compile(r"\b(bpf_map_update_elem|bpf_map_delete_elem|bpf_map_get_next_key|map_keys\s*<|map_entries\s*<)")
OWNERS = "probes/"
SOURCE_SUFFIXES = (".h", ".cpp")
TAG = "// map owner violation"
INLINE_BLOCK = re.compile(r"/\*.*?\*/")

# Files that still write or walk maps themselves, each to move to an owner in probes/; a file
# listed here that no longer does fails the check, so the list only shrinks. remaining: issue #27
REMAINING = set()


def code_of(line):
    """LINE without its // comment (string literals with // do not occur in these files)."""
    return line.split("//", 1)[0]


def flagged_lines(text, place):
    """Line numbers of TEXT, read as the file PLACE (relative to agent/), that a map owner only may have."""
    if place.startswith(OWNERS):
        return []
    out, in_block = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if in_block:
            if "*/" not in line:
                continue
            line, in_block = line.split("*/", 1)[1], False
        line = INLINE_BLOCK.sub(" ", line)
        if "/*" in line:
            line, in_block = line.split("/*", 1)[0], True
        if CALLS.search(code_of(line)):
            out.append(n)
    return out


def scan(root):
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(dirpath, name)
            place = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as f:
                lines = flagged_lines(f.read(), place)
            if lines:
                found[place] = lines
    return found


def check_tree(root):
    found = scan(root)
    failures = []
    for place, lines in sorted(found.items()):
        if place not in REMAINING:
            failures.append(f"{place}:{lines[0]}: writes or walks a BPF map outside agent/{OWNERS} "
                            f"(lines {', '.join(map(str, lines))}): give the map's owner in probes/ "
                            "a snapshot or a forget for it")
    for place in sorted(REMAINING):
        if place not in found:
            failures.append(f"{place}: listed in REMAINING but no longer touches a map: remove it from the list")
    for f in failures:
        print(f)
    if not failures:
        but = f" but the {len(REMAINING)} remaining (issue #27): {', '.join(sorted(REMAINING))}" if REMAINING else ""
        print(f"map owners: no file outside agent/{OWNERS} writes or walks a map{but}")
    return 1 if failures else 0


def check_fixtures(pairs):
    failed = False
    for pair in pairs:
        fixture, place = pair.split("=", 1)
        with open(fixture, encoding="utf-8") as f:
            text = f.read()
        want = [n for n, line in enumerate(text.splitlines(), 1) if TAG in line]
        got = flagged_lines(text, place)
        if not want:
            print(f"{fixture}: no line tagged '{TAG}': the fixture cannot show a refusal")
            failed = True
        elif got != want:
            print(f"{fixture} as {place}: flagged lines {got}, tagged {want}")
            failed = True
        else:
            print(f"{fixture} as {place}: refused at lines {got}, as tagged")
    return 1 if failed else 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = argv[1] if len(argv) > 1 else os.path.join(here, "..", "..", "agent")
    if len(argv) > 2 and argv[2] == "--expect-flagged":
        return check_fixtures(argv[3:])
    return check_tree(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
