#!/usr/bin/env python3
"""Side-by-side engine benchmark: vigil-worker vs llama.cpp (llama-cpp-python) on the same GGUF.

Same file, same machine, same thread count, in one run, alternating rounds so both see the same
machine noise. Reports tokens/s for pp (prompt processing) and tg (generation) and the ratios.
llama.cpp is driven through its C API (llama_decode) to keep Python out of the timed loop.

usage: .venv-ref/bin/python bench/engine_vs_llamacpp.py [--threads 2] [--rounds 3]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
WORKER = os.environ.get("VIGIL_WORKER", os.path.join(ROOT, "build", "release", "worker", "vigil-worker"))


def token_at(i, n_vocab):
    return (i * 7919 + 13) % n_vocab  # same ids as vigil-worker bench


class LlamaCpp:
    def __init__(self, threads, n_ctx, flash_attn, n_seq_max=1, use_mmap=True):
        import llama_cpp as lc
        self.lc = lc
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.use_mmap = use_mmap  # False: llama.cpp reads the weights into a buffer of its own
        self.model = lc.llama_model_load_from_file(MODEL.encode(), mp)
        cp = lc.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_seq_max = n_seq_max
        cp.kv_unified = True  # one cache shared by all sequences, as vigil's paged cache
        cp.n_batch = 512
        cp.n_ubatch = 512
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[flash_attn]
        self.ctx = lc.llama_init_from_model(self.model, cp)
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.version = lc.__version__

    def clear(self):
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)

    def decode(self, tokens):
        arr = (self.lc.llama_token * len(tokens))(*tokens)
        rc = self.lc.llama_decode(self.ctx, self.lc.llama_batch_get_one(arr, len(tokens)))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def pp(self, n):
        self.clear()
        toks = [token_at(i, self.n_vocab) for i in range(n)]
        t0 = time.perf_counter()
        for s in range(0, n, 512):
            self.decode(toks[s:s + 512])
        return n / (time.perf_counter() - t0)

    def decode_batch(self, batch, rows):
        """rows: (token, pos, seq, want_logits) for each token of one llama_decode call."""
        batch.n_tokens = len(rows)
        for i, (tok, pos, seq, logits) in enumerate(rows):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if logits else 0
        rc = self.lc.llama_decode(self.ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def tg_batched(self, n, seqs):
        """vigil-worker bench's tgB: `seqs` sequences with 8-token prompts, then n steps of one token
        per sequence in one llama_decode each (llama-batched-bench's shape)."""
        self.clear()
        batch = self.lc.llama_batch_init(max(8, seqs), 0, 1)
        try:
            for s in range(seqs):
                self.decode_batch(batch, [(token_at(i + s, self.n_vocab), i, s, i == 7) for i in range(8)])
            t0 = time.perf_counter()
            for step in range(n):
                self.decode_batch(batch, [(token_at(step * 31 + s, self.n_vocab), 8 + step, s, True)
                                          for s in range(seqs)])
            return n * seqs / (time.perf_counter() - t0)
        finally:
            self.lc.llama_batch_free(batch)

    def tg(self, n):
        self.clear()
        self.decode([token_at(i, self.n_vocab) for i in range(8)])
        t0 = time.perf_counter()
        for step in range(n):
            self.decode([token_at(step * 31, self.n_vocab)])
        return n / (time.perf_counter() - t0)


def vigil(threads, pp, tg, seqs, weights):
    out = subprocess.run([WORKER, "bench", "-m", MODEL, "-t", str(threads), "-p", str(pp), "-n", str(tg),
                          "-s", str(seqs), "-r", "1", "--weights", weights], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


def startup_to_first_token_ms(threads, runs=5):
    """Wall time of `generate -n 1` (process start, mmap, tokenize, prefill, first token, exit),
    warm page cache: an upper bound of start-to-first-token."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([WORKER, "generate", "-m", MODEL, "-p", "Hello", "-n", "1", "-t", str(threads)],
                       check=True, capture_output=True)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--llama-flash-attn", choices=["auto", "off", "on"], default="auto",
                    help="llama.cpp's flash attention setting (auto is its default)")
    a = ap.parse_args()

    ref = LlamaCpp(a.threads, n_ctx=max(a.pp, a.tg + 8) + 16, flash_attn=a.llama_flash_attn)
    ref_batched = LlamaCpp(a.threads, n_ctx=a.seqs * (a.tg + 8) + 16, flash_attn=a.llama_flash_attn,
                           n_seq_max=a.seqs)
    ref_no_mmap = LlamaCpp(a.threads, n_ctx=max(a.pp, a.tg + 8) + 16, flash_attn=a.llama_flash_attn,
                           use_mmap=False)
    rows = {"llama.cpp pp": [], "llama.cpp tg": [], "llama.cpp tg no-mmap": [], "llama.cpp batched tg": [],
            "vigil pp": [], "vigil tg": [], "vigil tg page_cache": [], "vigil batched tg": [],
            "weights GB/s": [], "weights GB/s page_cache": [], "ideal GB/s": []}
    kernels = cpu = ""
    runs = {}
    for _ in range(a.rounds):
        rows["llama.cpp pp"].append(ref.pp(a.pp))
        rows["llama.cpp tg"].append(ref.tg(a.tg))
        rows["llama.cpp tg no-mmap"].append(ref_no_mmap.tg(a.tg))
        rows["llama.cpp batched tg"].append(ref_batched.tg_batched(a.tg, a.seqs))
        for weights in ("huge_pages", "page_cache"):
            runs[weights] = v = vigil(a.threads, a.pp, a.tg, a.seqs, weights)
            kernels, cpu = v["kernels"], v["cpu"]
            suffix = "" if weights == "huge_pages" else " page_cache"
            rows["vigil tg" + suffix].append(v["tg_tps"])
            rows["weights GB/s" + suffix].append(v["weights_read_gbs"])
            if weights == "huge_pages":
                rows["vigil pp"].append(v["pp_tps"])
                rows["vigil batched tg"].append(v["batch_tg_tps"])
                rows["ideal GB/s"].append(v["read_gbs"])
    med = {k: statistics.median(v) for k, v in rows.items()}
    weight_bytes = runs["huge_pages"]["weight_bytes"]
    print(f"CPU: {cpu}; threads {a.threads}; rounds {a.rounds} (median)")
    print(f"llama-cpp-python {ref.version} (flash_attn {a.llama_flash_attn}), built with: "
          f"{ref.lc.llama_print_system_info().decode().strip()}")
    print(f"vigil kernels {kernels}")
    print(f"{'test':<28}{'llama.cpp tok/s':>16}{'vigil tok/s':>14}{'vigil/llama.cpp':>17}")
    print(f"{'pp' + str(a.pp):<28}{med['llama.cpp pp']:>16.1f}{med['vigil pp']:>14.1f}"
          f"{med['vigil pp'] / med['llama.cpp pp']:>17.2f}")
    print(f"{'tg' + str(a.tg):<28}{med['llama.cpp tg']:>16.1f}{med['vigil tg']:>14.1f}"
          f"{med['vigil tg'] / med['llama.cpp tg']:>17.2f}")
    print(f"{'tg' + str(a.tg) + ' x ' + str(a.seqs) + ' seqs (aggregate)':<28}{med['llama.cpp batched tg']:>16.1f}"
          f"{med['vigil batched tg']:>14.1f}{med['vigil batched tg'] / med['llama.cpp batched tg']:>17.2f}")
    print(f"batched/single-stream: vigil {med['vigil batched tg'] / med['vigil tg']:.2f}x, "
          f"llama.cpp {med['llama.cpp batched tg'] / med['llama.cpp tg']:.2f}x")
    print(f"{'tg' + str(a.tg) + ' llama.cpp --no-mmap':<28}{med['llama.cpp tg no-mmap']:>16.1f}{med['vigil tg']:>14.1f}"
          f"{med['vigil tg'] / med['llama.cpp tg no-mmap']:>17.2f}")
    print(f"{'tg' + str(a.tg) + ' vigil page_cache':<28}{med['llama.cpp tg']:>16.1f}{med['vigil tg page_cache']:>14.1f}"
          f"{med['vigil tg page_cache'] / med['llama.cpp tg']:>17.2f}")
    # The bound of decode: every weight read once a token, at the read bandwidth of the weights'
    # own mapping (what decode can get) and of an ideal huge-page copy of the same bytes.
    print(f"memory-bandwidth bound: {weight_bytes / 1e6:.1f} MB of weights per token, {a.threads} threads reading")
    for name, gbs_key, tg_key in (("weights in huge pages", "weights GB/s", "vigil tg"),
                                  ("weights in page cache", "weights GB/s page_cache", "vigil tg page_cache"),
                                  ("ideal huge-page buffer", "ideal GB/s", "vigil tg")):
        bound = med[gbs_key] * 1e9 / weight_bytes
        print(f"  {name:<24}{med[gbs_key]:>6.1f} GB/s = {bound:>6.1f} tok/s; vigil tg {med[tg_key]:.1f} "
              f"= {med[tg_key] / bound * 100:.0f}% of it, llama.cpp (mmap) {med['llama.cpp tg'] / bound * 100:.0f}%")
    print(f"process start to first token (vigil generate -n 1, warm cache, median of 5): "
          f"{startup_to_first_token_ms(a.threads):.0f} ms")
    json.dump({"median": med, "rounds": rows}, sys.stderr)
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()
