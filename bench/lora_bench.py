#!/usr/bin/env python3
"""Measures LoRA hot-swap on a running `vigil-worker serve`: load latency (POST
/v1/load_lora_adapter, file read and validation included), resident-memory increment per adapter
(VmRSS of the server before and after the load, and after unload), and switch cost (latency of a
request on adapter X right after one on Y, against X after X and base after base). Adapters are
written by scripts/make_lora.py on every attention and FFN matrix of every layer.

usage: bench/run.sh bench/lora_bench.py VIGIL_WORKER MODEL [--ranks 8,64] [--type f16] [--reps 9] [--threads 2]
Prints a Markdown table (docs/performance.md, "LoRA").
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from vigil_harness import worker_client
from vigil_harness.worker_client import start_serve

MAKE_LORA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "make_lora.py")


def call(port, method, path, body=None):
    """The body of a request that must succeed; the run stops on any other answer."""
    status, _, raw = worker_client.call(port, method, path, body, timeout=300)
    if status != 200:
        sys.exit(f"{method} {path}: {status} {raw[:300]!r}")
    return raw


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def request_seconds(port, model, prompt, max_tokens):
    t0 = time.perf_counter()
    call(port, "POST", "/v1/completions",
         {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("model")
    p.add_argument("--ranks", default="8,64")
    p.add_argument("--type", default="f16", choices=["f16", "f32"])
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    ranks = [int(r) for r in a.ranks.split(",")]

    tmp = tempfile.mkdtemp(prefix="vigil-lora-bench-")
    sizes = {}
    for r in ranks:
        out = os.path.join(tmp, f"r{r}.gguf")
        subprocess.run([sys.executable, MAKE_LORA, "--model", a.model, "--out", out,
                        "--rank", str(r), "--type", a.type, "--targets", "all", "--seed", str(r)],
                       check=True, stdout=subprocess.DEVNULL)
        sizes[r] = os.path.getsize(out) / 2**20
    cfg = os.path.join(tmp, "serve.yaml")
    with open(cfg, "w") as f:
        f.write(f"engine:\n  threads: {a.threads}\n")
    proc, port, _ = start_serve([a.binary, "serve", "-m", a.model, "--port", "0", "--adapter-dir", tmp,
                                 "--config", cfg, "--allow-runtime-adapters"])
    base = os.path.basename(a.model)
    prompt = "Write a short story about a lighthouse keeper who finds a message in a bottle. " * 2
    try:
        request_seconds(port, base, prompt, 4)  # warm the weights' pages and the scratch buffers
        rows = []
        for r in ranks:
            loads, incs, after_unload = [], [], []
            for i in range(a.reps):
                before = rss_mib(proc.pid)
                t0 = time.perf_counter()
                call(port, "POST", "/v1/load_lora_adapter", {"lora_name": f"r{r}", "lora_path": f"r{r}.gguf"})
                loads.append(time.perf_counter() - t0)
                incs.append(rss_mib(proc.pid) - before)
                call(port, "POST", "/v1/unload_lora_adapter", {"lora_name": f"r{r}"})
                after_unload.append(rss_mib(proc.pid) - before)
            rows.append((r, sizes[r], statistics.median(loads) * 1e3, max(loads) * 1e3, incs[0],
                         statistics.median(incs), statistics.median(after_unload)))
        print(f"adapters: {a.type}, all attention+FFN matrices of every layer; {a.reps} loads each\n")
        print("| rank | file MiB | load ms (median) | load ms (max) | RSS +MiB (first load) | RSS +MiB (median) "
              "| RSS after unload +MiB |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |" % row)

        for r in ranks:
            call(port, "POST", "/v1/load_lora_adapter", {"lora_name": f"r{r}", "lora_path": f"r{r}.gguf"})
        x, y = f"r{ranks[0]}", f"r{ranks[-1]}"
        n_tok = 16
        cases = {"base after base": [], f"{x} after {x}": [], f"{x} after {y}": [], f"{y} after {y}": [],
                 f"{y} after {x}": []}
        for _ in range(a.reps):
            for prev, cur in [(base, base), (x, x), (y, x), (y, y), (x, y)]:
                request_seconds(port, prev, prompt, n_tok)
                label = ("base" if cur == base else cur) + " after " + ("base" if prev == base else prev)
                cases[label].append(request_seconds(port, cur, prompt, n_tok))
        print(f"\nswitch cost: one request ({len(prompt.split())} words of prompt, {n_tok} tokens, greedy) right "
              f"after another; median of {a.reps}\n")
        print("| request | ms (median) | vs same adapter before |")
        print("|---|---|---|")
        med = {k: statistics.median(v) * 1e3 for k, v in cases.items()}
        for k, v in med.items():
            cur = k.split(" after ")[0]
            same = med[f"{cur} after {cur}"]
            print(f"| {k} | {v:.1f} | {v - same:+.1f} |")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
