#!/usr/bin/env python3
"""The build refuses an include that points up a layer.

Builds each target named TARGET=HEADER in the build tree and expects it to fail because HEADER
is not found (the library the source belongs to has no include root for the layer above); the
control targets (plain names) must build, so a failure for another reason, e.g. a broken
toolchain, does not pass as enforcement.

usage: check_build_layers.py BUILD_DIR CONTROL... TARGET=HEADER...
"""
import subprocess
import sys


def build(build_dir, target):
    r = subprocess.run(["cmake", "--build", build_dir, "--target", target], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build_dir, specs = sys.argv[1], sys.argv[2:]
    failures = 0
    for spec in specs:
        target, _, header = spec.partition("=")
        rc, out = build(build_dir, target)
        if not header:
            ok = rc == 0
            print("%s %s: the control %s" % ("ok  " if ok else "FAIL", target, "builds" if ok else "does not build"))
            if not ok:
                print(out[-3000:])
        else:
            refused = rc != 0 and header in out and ("No such file" in out or "not found" in out)
            print("%s %s: %s" % ("ok  " if refused else "FAIL", target,
                                 "refused, %s not found" % header if refused else "was not refused for %s" % header))
            if not refused:
                print(out[-3000:])
            ok = refused
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
