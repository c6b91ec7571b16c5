#!/usr/bin/env python3
"""The agent's includes point down: no file under agent/ includes a file of a higher layer.

Layers, lowest first (a file may include its own layer and any below it):

  stats       agent/stats/       the agent's own bookkeeping, written by every layer above
  discovery   agent/discovery/   processes: labels, liveness, the libraries they map
  probes      agent/probes/      one loader per BPF program (bpf/*.bpf.c) and their helpers
  collectors  agent/collectors/  read the probes' maps at scrape time; metric and label helpers
  correlate   agent/correlate/   joins two probe sets (TCP state and failed collectives)
  config      agent/config/      read by the sets and the agent only; the layers below take values
  sets        agent/sets/        each probe set: its probe, its collectors, the registry of sets
  export      agent/export/      the HTTP endpoint
  agent       agent/agent.*      owns the sets, runs the loop
  main        agent/main.cpp, preflight.*, libbpf_log.*: start-up, before the agent runs

Below all of them, and free to include: bpf/ (the structs shared with the BPF programs and the
generated skeletons), common/, generated headers (vigil/version.h) and system headers. An
include is resolved as the compiler does: next to the including file, then from agent/; what is
found under neither is not the agent's. Every file under agent/ must belong to a layer, so a new
directory has to be placed here.

usage: check_agent_layers.py [AGENT_DIR]   (default: the agent/ next to tests/)
"""
import os
import re
import sys

LAYERS = [
    ("stats", ["stats/"]),
    ("discovery", ["discovery/"]),
    ("probes", ["probes/"]),
    ("collectors", ["collectors/"]),
    ("correlate", ["correlate/"]),
    ("config", ["config/"]),
    ("sets", ["sets/"]),
    ("export", ["export/"]),
    ("agent", ["agent.h", "agent.cpp"]),
    ("main", ["main.cpp", "preflight.h", "preflight.cpp", "libbpf_log.h", "libbpf_log.cpp"]),
]
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """Index in LAYERS of the agent-relative path `rel`, or None."""
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in prefixes):
            return i
    return None


def resolve(agent_dir, including, delim, name):
    """Agent-relative path the include names, or None when it is not an agent file."""
    candidates = [os.path.join(agent_dir, name)]
    if delim == '"':
        candidates.insert(0, os.path.join(os.path.dirname(including), name))
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(c) and os.path.commonpath([c, agent_dir]) == agent_dir:
            return os.path.relpath(c, agent_dir)
    return None


def check(agent_dir):
    agent_dir = os.path.normpath(os.path.abspath(agent_dir))
    problems = []
    files = 0
    for root, dirs, names in os.walk(agent_dir):
        dirs.sort()
        for name in sorted(names):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, agent_dir)
            files += 1
            own = layer_of(rel)
            if own is None:
                problems.append("agent/%s: in no layer (place it in LAYERS of %s)" % (rel, os.path.basename(__file__)))
                continue
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = resolve(agent_dir, path, m.group(1), m.group(2))
                    if target is None:
                        continue
                    theirs = layer_of(target)
                    if theirs is not None and theirs > own:
                        problems.append("agent/%s:%d: %s includes agent/%s, %s (a higher layer)" % (
                            rel, lineno, LAYERS[own][0], target, LAYERS[theirs][0]))
    return files, problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    agent_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "agent")
    files, problems = check(agent_dir)
    if files == 0:
        print("FAIL: no sources under %s" % agent_dir)
        return 1
    for p in problems:
        print(p)
    if problems:
        print("FAIL: %d problem(s) with the layer order (%s)" % (
            len(problems), " < ".join(name for name, _ in LAYERS)))
        return 1
    print("ok: %d files, every include at or below its layer (%s)" % (
        files, " < ".join(name for name, _ in LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
