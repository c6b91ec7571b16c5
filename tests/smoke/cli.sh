#!/usr/bin/env bash
# Smoke test: BINARY --help and --version succeed and say what they are; a bad flag exits 2.
set -euo pipefail
bin=$1 name=$2
"$bin" --help | grep -q "usage: vigil-$name" || { echo "--help did not print usage"; exit 1; }
"$bin" --version | grep -Eq "^vigil-$name [0-9]+\.[0-9]+\.[0-9]+" || { echo "--version output wrong"; exit 1; }
set +e
"$bin" --no-such-flag >/dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] || { echo "unknown flag exited $rc, expected 2"; exit 1; }
echo "vigil-$name: --help, --version, bad flag ok"
