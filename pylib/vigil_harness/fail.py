"""How a check of a test or a benchmark fails: one FAIL line, exit status 1."""
import os
import sys


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def require_root():
    if os.geteuid() != 0:
        fail("needs root (BPF, network namespaces)")
