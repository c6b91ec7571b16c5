#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from a copy of its seed corpus; any crash,
# sanitizer report or leak fails the test and leaves the reproducer in the log.
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
[[ -n "$seeds" ]] && cp "$seeds"/* "$work/corpus/"
cd "$work"
"$fuzzer" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 corpus 2>&1 | tail -n 25
