#!/usr/bin/env python3
"""How far llama.cpp is from itself: its flash-attention path against the fixtures made with it
off. The scale for vigil's own distance from llama.cpp (docs/performance.md, "Correctness").

usage: .venv-ref/bin/python bench/llamacpp_attention_paths.py
"""
import json
import os

import llama_cpp as lc
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def logits(ctx):
    return np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, -1), shape=(49152,)).copy()


def main():
    fixture = json.load(open(os.path.join(ROOT, "tests", "fixtures", "greedy.json")))
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(MODEL.encode(), lc.llama_model_default_params())
    cp = lc.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 512, 512, 512, 2, 2
    cp.flash_attn_type = 1
    worst, identical, first_differs = 0.0, 0, 0
    for case in fixture["cases"]:
        ctx = lc.llama_init_from_model(model, cp)
        prompt = case["prompt_ids"]
        lc.llama_decode(ctx, lc.llama_batch_get_one((lc.llama_token * len(prompt))(*prompt), len(prompt)))
        first = logits(ctx)
        worst = max(worst, max(abs(first[i] - v) for i, v in case["first_top_logits"]))
        out = []
        for _ in range(len(case["generated_ids"])):
            out.append(int(np.argmax(logits(ctx))))
            lc.llama_decode(ctx, lc.llama_batch_get_one((lc.llama_token * 1)(out[-1]), 1))
        identical += out == case["generated_ids"]
        first_differs += out[0] != case["generated_ids"][0]
        lc.llama_free(ctx)
    print(f"llama.cpp flash attention on vs off: top-32 first-step logits max diff {worst:.3f}; "
          f"{identical}/{len(fixture['cases'])} continuations identical; first token differs in {first_differs}")


if __name__ == "__main__":
    main()
