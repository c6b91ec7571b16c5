#!/usr/bin/env python3
"""Two vigil-worker binaries side by side: `vigil-worker bench` of A and B alternating, round by
round, on the same GGUF and thread count, so both see the same machine noise. For a change that
must not move speed (a refactor): the B/A ratios of pp, tg and batched tg, medians over rounds.

The timed loops are the worker's own (`vigil-worker bench`, the vigil side of
bench/engine_vs_llamacpp.py); the order alternates A,B then B,A so neither always runs second.

usage: bench/worker_ab.py A_BINARY B_BINARY [--threads 2] [--rounds 10] [--pp 512] [--tg 128] [--seqs 8]
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
FIGURES = [("pp", "pp_tps"), ("tg", "tg_tps"), ("batched tg", "batch_tg_tps")]


def bench(binary, a):
    out = subprocess.run([binary, "bench", "-m", MODEL, "-t", str(a.threads), "-p", str(a.pp), "-n", str(a.tg),
                          "-s", str(a.seqs), "-r", "1"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--seqs", type=int, default=8)
    a = ap.parse_args()
    runs = {"a": [], "b": []}
    for r in range(a.rounds):
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            runs[side].append(bench(getattr(a, side), a))
    print(f"A {a.a}\nB {a.b}\nkernels {runs['b'][0]['kernels']}, threads {a.threads}, {a.rounds} rounds, medians")
    print(f"{'test':<24}{'A tok/s':>10}{'B tok/s':>10}{'B/A':>8}{'B/A per round (min..max)':>28}")
    for name, key in FIGURES:
        av = [r[key] for r in runs["a"]]
        bv = [r[key] for r in runs["b"]]
        ratios = [y / x for x, y in zip(av, bv)]
        label = {"pp": f"pp{a.pp}", "tg": f"tg{a.tg}", "batched tg": f"tg{a.tg} x {a.seqs} seqs"}[name]
        print(f"{label:<24}{statistics.median(av):>10.1f}{statistics.median(bv):>10.1f}"
              f"{statistics.median(bv) / statistics.median(av):>8.3f}{min(ratios):>18.3f}..{max(ratios):.3f}")


if __name__ == "__main__":
    main()
