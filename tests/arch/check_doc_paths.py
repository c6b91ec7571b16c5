#!/usr/bin/env python3
"""Every path of the tree a document names exists: a `worker/...`, `agent/...`, `bpf/...`,
`common/...`, `tests/...`, `bench/...`, `deploy/...`, `pylib/...` or `scripts/...` path written in
docs/ (and README.md) is a file or a directory of the repository, so a file moved or renamed
without its documents fails here instead of sending a reader to nothing.

A path is such a word starting the path (not after another `/`, so `build/dev/agent/vigil-agent`
is a build output, not checked) and ending before the first character that cannot be in a file
name here (`:` of a line number, `::` of a symbol, a closing quote or bracket). A path without its
extension names a module (`agent/preflight`: its .h and .cpp) and exists when one of its files
does. Paths with a
placeholder (`<NAME>`, `NAME.bpf.c`, `*`, `…`) name a pattern, not a file, and are not checked;
a placeholder is a run of two or more capitals that is not a file name of the tree (README,
CMakeLists).

usage: check_doc_paths.py ROOT
       check_doc_paths.py ROOT --expect-missing FIXTURE PATH...
The second form checks the one document FIXTURE (tests/arch/doc_paths/) against ROOT and passes
only when the paths it reports missing are exactly PATH...: the check itself must be able to say no.
"""
import glob
import os
import re
import sys

TOPS = ('worker', 'agent', 'bpf', 'common', 'tests', 'bench', 'deploy', 'pylib', 'scripts')
PATH = re.compile(r'(?<![\w/.\-$])((?:%s)/[\w.\-/<>*…{}$]*)' % '|'.join(TOPS))
MODULE_EXTENSIONS = ('', '.h', '.cpp', '.c', '.py')
PLACEHOLDER = re.compile(r'[<>*…{}$]|(?<![A-Za-z])(?!README|CMakeLists)[A-Z]{2,}(?![a-z])')


def paths_in(text):
    """(line number, path) of every tree path in TEXT that names a file, not a pattern."""
    for n, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip('.-/')
            if PLACEHOLDER.search(path):
                continue
            yield n, path


def exists(root, path):
    return any(os.path.exists(os.path.join(root, path + ext)) for ext in MODULE_EXTENSIONS)


def missing(root, doc):
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    return [(n, p) for n, p in paths_in(text) if not exists(root, p)]


def documents(root):
    return sorted(glob.glob(os.path.join(root, 'docs', '**', '*.md'), recursive=True)) + [os.path.join(root, 'README.md')]


def main():
    root = sys.argv[1]
    if len(sys.argv) > 3 and sys.argv[2] == '--expect-missing':
        fixture, want = sys.argv[3], sorted(sys.argv[4:])
        got = sorted(p for _, p in missing(root, fixture))
        if got != want:
            print("FAIL: %s: reported missing %s, want %s" % (fixture, got, want))
            return 1
        print("ok: %s: exactly %s reported missing" % (os.path.basename(fixture), want))
        return 0
    bad, checked = 0, 0
    for doc in documents(root):
        with open(doc, encoding='utf-8') as f:
            checked += sum(1 for _ in paths_in(f.read()))
        for n, p in missing(root, doc):
            print("%s:%d: %s does not exist" % (os.path.relpath(doc, root), n, p))
            bad += 1
    if bad:
        print("FAIL: %d of %d paths in the documents name nothing in the tree" % (bad, checked))
        return 1
    print("ok: %d paths in %d documents all exist" % (checked, len(documents(root))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
