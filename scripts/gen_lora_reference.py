#!/usr/bin/env python3
"""Writes the llama.cpp LoRA reference fixture: a tiny adapter from scripts/make_lora.py
(tests/fixtures/lora_tiny.gguf) and llama.cpp's greedy continuations with it
(tests/fixtures/lora_greedy.json), checked by tests/unit/worker/model/lora_reference_test.cpp.
Run with the reference environment (scripts/setup_reference.sh):

    .venv-ref/bin/python scripts/gen_lora_reference.py
"""
import json
import pathlib
import subprocess
import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
FIXTURES = ROOT / "tests" / "fixtures"
ADAPTER = FIXTURES / "lora_tiny.gguf"
MAKE_LORA = ["--rank", "2", "--type", "f16", "--targets", "attn_q,attn_v,ffn_down", "--layers", "0,1,2,3",
             "--b-range", "0.5", "--seed", "3"]
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a",
           "The three primary colors are", "To make a cup of tea, first"]
N_GENERATED = 24
TOP_K_LOGITS = 32
PARAMS = {"n_ctx": 512, "n_threads": 2, "n_batch": 512, "flash_attn": False, "seed": 0}


def greedy(llm, prompt_ids):
    n_vocab = llm.n_vocab()
    llm.reset()
    llm.eval(prompt_ids)
    first, out, margins = None, [], []
    for _ in range(N_GENERATED):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,)).copy()
        if first is None:
            first = logits
        token = int(np.argmax(logits))
        out.append(token)
        top2 = np.partition(logits, -2)[-2:]
        margins.append(round(float(top2[1] - top2[0]), 4))
        if len(out) < N_GENERATED:
            llm.eval([token])
    return out, margins, first


def main():
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_lora.py"), "--model", str(MODEL), "--out",
                    str(ADAPTER), *MAKE_LORA], check=True)
    base = Llama(str(MODEL), logits_all=False, verbose=False, **PARAMS)
    lora = Llama(str(MODEL), lora_path=str(ADAPTER), logits_all=False, verbose=False, **PARAMS)
    cases = []
    for text in PROMPTS:
        prompt_ids = lora.tokenize(text.encode(), add_bos=False, special=True)
        base_ids, _, _ = greedy(base, prompt_ids)
        ids, margins, first = greedy(lora, prompt_ids)
        top = np.argsort(-first, kind="stable")[:TOP_K_LOGITS]
        cases.append({"text": text, "prompt_ids": prompt_ids, "generated_ids": ids, "generated_margins": margins,
                      "base_generated_ids": base_ids,
                      "first_top_logits": [[int(i), float(first[i])] for i in top]})
        print(f"{text!r}: adapter changes the continuation: {ids != base_ids}", file=sys.stderr)
    doc = {"generator": "scripts/gen_lora_reference.py", "llama_cpp_python": llama_cpp.__version__,
           "adapter": "lora_tiny.gguf", "make_lora": MAKE_LORA, "llama_params": PARAMS,
           "n_generated": N_GENERATED, "cases": cases}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in doc.items() if k != "cases"]
    lines += ['  "cases": ['] + [f"    {json.dumps(c)}," for c in cases]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["  ]", "}"]
    (FIXTURES / "lora_greedy.json").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
