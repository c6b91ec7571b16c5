#!/usr/bin/env python3
"""Writes a random LoRA adapter for a GGUF model in llama.cpp's GGUF LoRA format (what
convert_lora_to_gguf.py produces): general.type=adapter, adapter.type=lora, adapter.lora.alpha,
and per adapted matrix `<tensor>.lora_a` (ggml shape [n_in, rank]) and `<tensor>.lora_b`
([rank, n_out]). For tests and measurements; standard library only.

A ~ U(±1/sqrt(n_in)) (PEFT's init scale), B ~ U(±b_range) (B = 0 with --zero-b). Values are
drawn once into a pool and tensors are filled from it at random offsets, which keeps a rank-64
adapter on every matrix of a model fast to write without numpy.

usage: make_lora.py --model MODEL.gguf --out OUT.gguf [--rank 8] [--alpha 16] [--type f32|f16]
                    [--targets attn_q,attn_v,ffn_down|all] [--layers 0,1,2|all] [--zero-b]
                    [--b-range 0.1] [--seed 1] [--arch NAME]
"""
import argparse
import array
import random
import struct
import sys

ALL_TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
GGUF_MAGIC = 0x46554747
ALIGN = 32

# GGUF metadata value types: fixed sizes of the scalar ones (8 = string, 9 = array).
SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
SCALAR_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_metadata(path):
    """The model's scalar and string metadata (arrays are skipped)."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # metadata sits at the front; the vocabulary is a few MB
    magic, version, _n_tensors, n_kv = struct.unpack_from("<IIQQ", data, 0)
    if magic != GGUF_MAGIC or version < 2:
        sys.exit(f"{path}: not a GGUF v2+ file")
    at = 24

    def string(at):
        (n,) = struct.unpack_from("<Q", data, at)
        return data[at + 8 : at + 8 + n].decode("utf-8", "replace"), at + 8 + n

    def value(t, at):
        if t == 8:
            return string(at)
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, at)
            at += 12
            for _ in range(n):
                _, at = value(et, at)
            return None, at
        return struct.unpack_from("<" + SCALAR_FMT[t], data, at)[0], at + SCALAR_SIZE[t]

    meta = {}
    for _ in range(n_kv):
        key, at = string(at)
        (t,) = struct.unpack_from("<I", data, at)
        meta[key], at = value(t, at + 4)
    return meta


def dims(meta):
    """(n_in, n_out) of each adaptable matrix, and the layer count."""
    arch = meta["general.architecture"]
    embd = meta[f"{arch}.embedding_length"]
    ff = meta[f"{arch}.feed_forward_length"]
    heads = meta[f"{arch}.attention.head_count"]
    kv = embd // heads * meta.get(f"{arch}.attention.head_count_kv", heads)
    shapes = {"attn_q": (embd, embd), "attn_k": (embd, kv), "attn_v": (embd, kv), "attn_output": (embd, embd),
              "ffn_gate": (embd, ff), "ffn_up": (embd, ff), "ffn_down": (ff, embd)}
    return arch, shapes, meta[f"{arch}.block_count"]


class Filler:
    """Random values from a pool of uniform(-1, 1) draws, scaled per tensor."""

    def __init__(self, rng):
        self.rng = rng
        self.pool = array.array("f", (rng.uniform(-1.0, 1.0) for _ in range(1 << 16)))

    def values(self, n, scale):
        out = array.array("f")
        while len(out) < n:
            start = self.rng.randrange(len(self.pool))
            out.extend(self.pool[start : start + min(n - len(out), len(self.pool) - start)])
        if scale != 1.0:
            out = array.array("f", (v * scale for v in out))
        return out


def encode(values, kind):
    if kind == "f16":
        return struct.pack(f"<{len(values)}e", *values)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: [(key, 'str'|'f32', value)]; tensors: [(name, ggml_type, [ne0, ne1], bytes)]."""
    head = struct.pack("<IIQQ", GGUF_MAGIC, 3, len(tensors), len(kvs))
    for key, kind, v in kvs:
        head += gguf_string(key)
        head += struct.pack("<I", 8) + gguf_string(v) if kind == "str" else struct.pack("<If", 6, v)
    offset = 0
    for name, gtype, shape, data in tensors:
        head += gguf_string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        head += struct.pack("<IQ", gtype, offset)
        offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
    with open(path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % ALIGN))
        for _, _, _, data in tensors:
            f.write(data + b"\0" * (-len(data) % ALIGN))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--type", choices=["f32", "f16"], default="f32")
    p.add_argument("--targets", default="attn_q,attn_v,ffn_down")
    p.add_argument("--layers", default="all")
    p.add_argument("--zero-b", action="store_true")
    p.add_argument("--b-range", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--arch", help="write this architecture instead of the model's (for broken adapters)")
    a = p.parse_args()

    arch, shapes, n_layer = dims(read_metadata(a.model))
    targets = ALL_TARGETS if a.targets == "all" else a.targets.split(",")
    for t in targets:
        if t not in shapes:
            sys.exit(f"unknown target {t!r}; choose from {','.join(ALL_TARGETS)}")
    layers = range(n_layer) if a.layers == "all" else [int(x) for x in a.layers.split(",")]
    rng = random.Random(a.seed)
    fill = Filler(rng)
    gtype = 1 if a.type == "f16" else 0
    tensors = []
    for layer in layers:
        for t in targets:
            n_in, n_out = shapes[t]
            base = f"blk.{layer}.{t}.weight"
            A = fill.values(n_in * a.rank, 1.0 / n_in**0.5)
            B = array.array("f", bytes(4 * a.rank * n_out)) if a.zero_b else fill.values(a.rank * n_out, a.b_range)
            tensors.append((base + ".lora_a", gtype, [n_in, a.rank], encode(A, a.type)))
            tensors.append((base + ".lora_b", gtype, [a.rank, n_out], encode(B, a.type)))
    kvs = [("general.architecture", "str", a.arch or arch), ("general.type", "str", "adapter"),
           ("adapter.type", "str", "lora"), ("adapter.lora.alpha", "f32", a.alpha)]
    write_gguf(a.out, kvs, tensors)
    size = sum(len(t[3]) for t in tensors)
    print(f"make_lora: {a.out}: rank {a.rank}, {len(tensors) // 2} matrices, {size / 2**20:.1f} MiB of {a.type}")


if __name__ == "__main__":
    main()
