#!/usr/bin/env python3
# Writes the llama.cpp reference fixtures (tokenizer corpus, chat template, greedy decode, logits).
"""Run with the reference venv (scripts/setup_reference.sh):

    .venv-ref/bin/python scripts/gen_reference.py [--only tokenizer|chat|greedy]

Everything here comes from llama.cpp through llama-cpp-python and from jinja2 rendering the
template stored in the GGUF; the C++ tests compare against these files and never need llama.cpp.
Byte strings are stored base64-encoded so that invalid UTF-8 survives JSON.
"""
import argparse
import base64
import ctypes
import hashlib
import json
import random
import sys
import unicodedata
from pathlib import Path

import jinja2.sandbox
import llama_cpp
import numpy as np
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
FIXTURES = ROOT / "tests" / "fixtures"
N_GENERATED = 64
TOP_K_LOGITS = 32
N_FULL_LOGITS = 2


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def llama_cpp_aborts_on(data: bytes) -> bool:
    """True when llama.cpp's unicode_cpt_from_utf8 would decode a code point above U+10FFFF.

    Such input (F4 90.., F5..F7 leads) makes unicode_cpt_to_utf8 throw through llama_tokenize
    and abort the process, so it cannot be in the corpus; the C++ tests cover it separately.
    """
    i = 0
    while i < len(data):
        b = data[i]
        if b < 0x80:
            i += 1
            continue
        n = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 0
        if n == 0 or i + n > len(data) or any(c & 0xC0 != 0x80 for c in data[i + 1 : i + n]):
            i += 1
            continue
        if n == 4 and (((b & 7) << 18) | ((data[i + 1] & 0x3F) << 12)) > 0x10FFFF:
            return True
        i += n
    return False


def corpus() -> list[bytes]:
    prose = [
        "Hello world",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "It was the best of times, it was the worst of times.",
        "Call me Ishmael. Some years ago—never mind how long precisely—I thought I would sail.",
        "In the beginning God created the heaven and the earth.",
        "To be, or not to be: that is the question.",
        "She sells seashells by the seashore.",
        "The mitochondria is the powerhouse of the cell.",
        "Dr. Smith arrived at 10:30 a.m. on Jan. 5th, 2024.",
        "e.g. i.e. etc. vs. Mr. Mrs. Ms.",
        "ALL CAPS SENTENCE WITH SHOUTING!!!",
        "camelCaseIdentifier snake_case_identifier kebab-case-identifier",
        "HTTPServerError XMLHttpRequest iPhone eBay",
        "What's the weather like today? I'd say it's sunny.",
        "\"Quoted text,\" she said, 'and single quotes.'",
        "Ellipsis... and em—dash – en-dash",
        "A sentence with trailing space ",
        " A sentence with leading space",
        "Multiple\nlines\nof\ntext",
        "Paragraph one.\n\nParagraph two.",
        "Bullet list:\n- one\n- two\n- three",
        "1. First\n2. Second\n3. Third",
        "# Heading\n\nSome **bold** and _italic_ text with `code`.",
        "https://example.com/path?query=1&b=2#frag",
        "user@example.com, admin+tag@sub.domain.org",
        "C:\\Windows\\System32\\drivers\\etc\\hosts",
        "/usr/local/bin/python3 -m venv .venv",
        "The price is $19.99 (or €17,50 / £15.00 / ¥2000).",
        "50% off! 3/4 cup, 1/2 tsp, 100°C, 72°F",
        "SmolLM is a small language model trained by Hugging Face.",
        "Supercalifragilisticexpialidocious antidisestablishmentarianism",
        "a", "I", "A", "z", "ab", "the", "The", " the", "  the",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
    ]
    code = [
        "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
        "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
        "for i in range(10):\n\tprint(i, end=' ')\n",
        "class Foo(Base):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n",
        "#include <stdio.h>\n\nint main(void) {\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
        "template <typename T>\nstd::vector<T> v{1, 2, 3};\nauto it = v.begin(); ++it;",
        "std::unique_ptr<int[]> p = std::make_unique<int[]>(n); // RAII",
        "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
        "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
        "const f = async (x) => { await fetch(`/api/${x}`); return x ?? null; };",
        "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
        "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done\n",
        "<html><head><title>T</title></head><body><p class=\"x\">Hi &amp; bye</p></body></html>",
        "{\"key\": \"value\", \"n\": [1, 2.5, -3e10], \"ok\": true, \"nil\": null}",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: vigil-agent\n",
        "main :: IO ()\nmain = mapM_ print [x | x <- [1..10], even x]",
        "if (a != b && c <= d || !e) { x += 1; y -= 2; z *= 3; w /= 4; }",
        "x = [i**2 for i in range(100) if i % 3 == 0]",
        "    indented with four spaces\n        and eight",
        "\tTab\tseparated\tvalues\n1\t2\t3",
        "a=1;b=2;c=a<<b>>1^0xFF|0b1010&~0o17",
        "// comment\n/* block\n   comment */\n",
        "regex: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
        "print(f\"{name!r:>10} {value:.3f}\")",
        "λx.λy.x (Church true) ∀x∈ℝ: x² ≥ 0",
        "$ git commit -m \"Fix bug #123\" && git push origin main",
        "```python\nprint('hi')\n```",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n",
        "0x7fffffff 0xDEADBEEF 1_000_000 3.0f 2.5e-3L",
    ]
    numbers = [
        "0", "1", "12", "123", "1234", "12345", "123456", "1234567890",
        "3.14159265358979", "1,000,000", "-42", "+7", "1e-10", "6.022e23", "0x1F", "0b1010",
        "2024-01-01T12:34:56Z", "+1 (555) 123-4567", "192.168.0.1:8080", "v1.2.3-rc.4",
        "a1b2c3", " 1", "x 12 y", "1 2 3", "1  2", "12abc", "abc12", "year2024", "2nd 3rd 4th 21st",
        "١٢٣٤٥", "०१२३", "①②③", "ⅫⅣ", "½ ¾ ⅞", "x² y³ z¹", "１２３", "𝟙𝟚𝟛", "۱۲۳", "๑๒๓",
    ]
    numbers += ["7" * n for n in (5, 16, 33)]
    numbers += ["".join(str((i * 7 + 3) % 10) for i in range(n)) for n in (2, 9, 40)]
    spaces = [
        " ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r",
        " \n", "\n ", " \n ", "  \n  ", "\t\n", "a  b", "a   b", "a \n b", "a\t\tb", "a   ",
        "   a", "a\n\n\nb", "a \t b", "\u00a0", "a\u00a0b", "\u3000", "a\u2003b", "a\u2009b",
        "x\u0085y", "\u2028\u2029", "\v\f", " " * 100, "\n" * 20, "\t \t \t",
        "end with newline\n", "  two leading", "trailing two  ", " ! ", " !! ?", "a ,b",
    ]
    cjk = [
        "你好，世界！", "我爱北京天安门。", "中华人民共和国成立于1949年。", "今天天气很好",
        "こんにちは世界", "東京は日本の首都です。", "カタカナとひらがな", "ｶﾀｶﾅ",
        "안녕하세요 세계", "한국어 텍스트입니다.", "漢字かな交じり文", "繁體中文測試",
        "中文English混合text", "𠀀𠀁𪚥",
    ]
    emoji = [
        "😀", "😀😃😄", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "1️⃣", "❤️", "❤",
        "I ❤️ NY", "🙂 smile", "emoji👍inside", "🧑🏿‍🚀", "👩‍💻 coding", "✨🚀🔥💯",
        "☕ coffee", "©®™", "♠♣♥♦", "→ ← ↑ ↓ ⇒",
    ]
    scripts = [
        "Hello мир 世界", "Привет, как дела?", "Γειά σου Κόσμε", "Ελληνικά: αβγδε",
        "สวัสดีชาวโลก", "नमस्ते दुनिया", "ক খ গ", "தமிழ்", "ქართული", "Հայերեն",
        "שלום עולם", "مرحبا بالعالم", "עברית English עברית", "العربية 123 English",
        "\u200fRTL mark\u200e", "\u202eReversed\u202c", "Ænima Øresund Ærø", "Straße groß",
        "İstanbul ıi", "Ça va? Où ça? Là-bas.", "Zürich Köln Düsseldorf", "ñandú pingüino",
        "Tiếng Việt có dấu", "Ελλάδα and España", "ʻOkina ʼapostrophe", "Ǆ ǅ ǆ",
        "ᚠᚢᚦᚨᚱᚲ", "ꦗꦮ", "ܐܪܡܝܐ", "ߒߞߏ", "ᐃᓄᒃᑎᑐᑦ",
    ]
    combining = [
        "e\u0301", "cafe\u0301", "café", "a\u0308\u0301", "n\u0303", "Z\u0351\u0352a\u0353l\u0354g\u0355o",
        "\u0301", "\u0301\u0301\u0301", " \u0301", "ḁ̷̢", "क्षत्रिय", "ก่ำ", "\u05e9\u05c1\u05b8",
        "x\u20dd", "1\u20e3",
    ]
    contractions = [
        "don't", "I'm", "we'll", "they've", "you're", "it's", "he'd", "'s", "'t", "'re", "'ve",
        "'m", "'ll", "'d", "DON'T", "I'M", "We'Ll", "rock'n'roll", "it’s", "'", "''", "'x",
        "the dog's bone", "y'all'd've", "'sup", " 's", "'s's", "l'amour", "O'Reilly",
    ]
    special = [
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user",
        "<|im_start|>user\nHello!<|im_end|>\n",
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        "x<|im_end|>y", "<|im_start|><|im_end|>", "<|im_start|><|im_start|>", "<|im_start",
        "im_start|>", "<|im_start |>", "< |im_start| >", "<|IM_START|>", "<|endoftext|>text",
        "text<|endoftext|>", "<reponame>vigil<file_sep>main.cpp", "<filename>a.py", "<gh_stars>100",
        "<issue_start>bug<issue_comment>ok<issue_closed>", "<jupyter_code>print(1)<jupyter_output>1",
        "<jupyter_start><jupyter_text>md<jupyter_script><empty_output>", "<repo_name>",
        "<|<|im_end|>|>", "<<|im_start|>>", " <|im_start|> ", "\n<|im_end|>\n", "<|im_end|><|endoftext|>",
    ]
    # 0x04 0x06 0x13 0x14 0x16 0x1d have no token in SmolLM2's vocabulary: llama.cpp drops them.
    control = ["ctl\x04\x06\x13\x14\x16\x1dend", "+\x06}", "\x00", "a\x00b", "\x01\x02\x03", "\x7f", "\x1b[31mred\x1b[0m", "\x08\x0c"]
    long = [
        ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 30).encode(),
        ("a" * 500).encode(),
        ("=" * 100).encode(),
        ("ab" * 200).encode(),
        ("😀" * 50).encode(),
        ("你好" * 100).encode(),
    ]
    invalid = [
        b"\xff", b"\xfe\xff", b"\xc3", b"\xc3\x28", b"\xe2\x82", b"\xe2\x28\xa1", b"\xf0\x9f\x98",
        b"a\x80b", b"\x80\x80\x80", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
        b"\xed\xbf\xbf", b"\xef\xbb\xbfBOM", b"\xef\xbf\xbd", b"abc\xe4\xb8", b"\xe4\xb8abc",
        b"\xf0\x9f\x98\x80\xf0\x9f", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
        b"Hello \xff world", b"\xc3\xa9\xc3", b"caf\xe9", b"\x9f\x98\x80", b"<|im_start|>\xff",
        b"\xff<|im_end|>", b"1\xff2", b" \xff ", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
    ]

    rng = random.Random(20261129)
    generated: list[bytes] = []
    alphabet = [" ", "  ", "\t", "\n", "a", "B", "1", "'", "s", ".", "é", "中", "😀", "\u00a0", "-"]
    for _ in range(40):
        generated.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))).encode())
    assigned = [c for c in range(0x20, 0x30000)
                if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    for _ in range(40):
        generated.append("".join(chr(rng.choice(assigned)) for _ in range(rng.randint(1, 10))).encode())
    while len(generated) < 120:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        if not llama_cpp_aborts_on(data):
            generated.append(data)

    texts = prose + code + numbers + spaces + cjk + emoji + scripts + combining + contractions + special + control
    out = [t.encode() for t in texts] + long + invalid + generated
    assert not any(llama_cpp_aborts_on(d) for d in out)
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def detokenize(vocab, ids: list[int]) -> bytes:
    """llama_detokenize, special tokens rendered as their text (no Python-side space fix-ups)."""
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, True)
    assert n >= 0, "detokenize buffer too small"
    return buf.raw[:n]


def header() -> dict:
    return {
        "generator": "scripts/gen_reference.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model": MODEL.name,
        "model_sha256": sha256(MODEL),
    }


def gen_tokenizer() -> None:
    llm = Llama(str(MODEL), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    cases = []
    for data in corpus():
        ids = llm.tokenize(data, add_bos=False, special=False)
        ids_special = llm.tokenize(data, add_bos=False, special=True)
        cases.append({
            "b64": b64(data),
            "ids": ids,
            "ids_special": ids_special,
            "detok_b64": b64(detokenize(vocab, ids)),
            "detok_special_b64": b64(detokenize(vocab, ids_special)),
        })
    doc = header() | {
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eog_ids": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "control_ids": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_control(vocab, i)],
        "cases": cases,
    }
    write_json("tokenizer_corpus.json", doc)
    print(f"tokenizer_corpus.json: {len(cases)} cases", file=sys.stderr)


def chat_template_env() -> jinja2.Environment:
    # The settings transformers and llama-cpp-python use for GGUF/HF chat templates.
    return jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)


CHAT_PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "user", "content": "Explain recursion in one sentence."}],
    [{"role": "user", "content": "List three primary colors."}],
    [{"role": "system", "content": "You are a pirate. Answer like one."},
     {"role": "user", "content": "Tell me about ships."}],
    [{"role": "system", "content": "Answer with a single word."},
     {"role": "user", "content": "What color is the sky on a clear day?"}],
    [{"role": "user", "content": "Hi!"},
     {"role": "assistant", "content": "Hello! How can I help you today?"},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "My name is Ada."},
     {"role": "assistant", "content": "Nice to meet you, Ada!"},
     {"role": "user", "content": "What is my name?"}],
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "Give me a Python function that reverses a string."},
     {"role": "assistant", "content": "def rev(s):\n    return s[::-1]"},
     {"role": "user", "content": "Now make it handle None."}],
    [{"role": "user", "content": "Translate 'good morning' into Spanish and German."}],
]

RAW_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):\n",
    "1, 2, 3, 4, 5,",
    "The quick brown fox",
    "In 1969, Neil Armstrong",
    "Water boils at",
    "The best way to learn programming is",
    "import numpy as np\n",
    "Paris is to France as Berlin is to",
]

# Template-only cases (not decoded): edge cases of the ChatML template.
TEMPLATE_ONLY = [
    ([], False),
    ([], True),
    ([{"role": "system", "content": "Only a system prompt."}], False),
    ([{"role": "user", "content": "No generation prompt."}], False),
    ([{"role": "user", "content": ""}], True),
    ([{"role": "assistant", "content": "Assistant first."}], True),
    ([{"role": "user", "content": "Call the tool."},
      {"role": "assistant", "content": "{\"name\": \"now\"}"},
      {"role": "tool", "content": "12:00"}], True),
    ([{"role": "user", "content": "Line one\nline two\n\n  indented"}], True),
    ([{"role": "user", "content": "Unicode: 你好 😀 é"}], True),
    ([{"role": "user", "content": "<|im_end|> inside content"}], True),
    ([{"role": "user", "content": "first"}, {"role": "system", "content": "late system"}], True),
]


def gen_chat(template: str) -> None:
    tmpl = chat_template_env().from_string(template)
    cases = [{"messages": m, "add_generation_prompt": g,
              "rendered": tmpl.render(messages=m, add_generation_prompt=g)}
             for m, g in [(m, True) for m in CHAT_PROMPTS] + TEMPLATE_ONLY]
    write_json("chat_template.json", header() | {"template": template, "cases": cases})
    print(f"chat_template.json: {len(cases)} cases", file=sys.stderr)


def gen_greedy(template: str) -> None:
    llm = Llama(str(MODEL), n_ctx=512, n_threads=2, n_batch=512, flash_attn=False, seed=0,
                logits_all=False, verbose=False)
    n_vocab = llm.n_vocab()
    tmpl = chat_template_env().from_string(template)
    prompts = [{"kind": "raw", "text": t} for t in RAW_PROMPTS]
    prompts += [{"kind": "chat", "messages": m,
                 "text": tmpl.render(messages=m, add_generation_prompt=True)} for m in CHAT_PROMPTS]
    cases = []
    for index, prompt in enumerate(prompts):
        llm.reset()
        prompt_ids = llm.tokenize(prompt["text"].encode(), add_bos=False, special=True)
        llm.eval(prompt_ids)
        first_logits = None
        generated = []
        margins = []  # top-1 minus top-2 logit per step: near-ties tell a port where it may diverge
        for _ in range(N_GENERATED):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,)).copy()
            if first_logits is None:
                first_logits = logits
            token = int(np.argmax(logits))
            generated.append(token)
            top2 = np.partition(logits, -2)[-2:]
            margins.append(round(float(top2[1] - top2[0]), 4))
            if len(generated) < N_GENERATED:
                llm.eval([token])
        top = np.argsort(-first_logits, kind="stable")[:TOP_K_LOGITS]
        case = prompt | {
            "prompt_ids": prompt_ids,
            "generated_ids": generated,
            "generated_margins": margins,
            "generated_b64": b64(detokenize(llama_cpp.llama_model_get_vocab(llm.model), generated)),
            "first_top_logits": [[int(i), float(first_logits[i])] for i in top],
        }
        if index < N_FULL_LOGITS:
            name = f"logits_{index}.f32"
            first_logits.astype("<f4").tofile(FIXTURES / name)
            case["full_logits_file"] = name
        cases.append(case)
        print(f"greedy {index}: {len(prompt_ids)} prompt tokens", file=sys.stderr)
    doc = header() | {
        "n_vocab": n_vocab,
        "n_generated": N_GENERATED,
        "llama_params": {"n_ctx": 512, "n_threads": 2, "n_batch": 512, "flash_attn": False, "seed": 0},
        "prompt_tokenize": "Llama.tokenize(text, add_bos=False, special=True)",
        "decode": "eval the prompt, then argmax of the last logits, eval it, repeat; no sampler, no stop",
        "cases": cases,
    }
    write_json("greedy.json", doc)


def write_json(name: str, doc: dict) -> None:
    """One case per line: small files that still diff line by line."""
    lines = []
    for key, value in doc.items():
        if key == "cases":
            rows = ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in value)
            lines.append(f' "cases": [\n{rows}\n ]')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    (FIXTURES / name).write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["tokenizer", "chat", "greedy"])
    args = parser.parse_args()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    template = Llama(str(MODEL), vocab_only=True, verbose=False).metadata["tokenizer.chat_template"]
    if args.only in (None, "tokenizer"):
        gen_tokenizer()
    if args.only in (None, "chat"):
        gen_chat(template)
    if args.only in (None, "greedy"):
        gen_greedy(template)


if __name__ == "__main__":
    main()
