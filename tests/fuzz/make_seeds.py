#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seed corpus: small valid files covering every metadata type."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def gguf(kvs, tensors):
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    for name, ttype, dims, blob in tensors:
        data += b"\0" * (-len(data) % 32)
        head += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ttype, len(data))
        data += blob
    head += b"\0" * (-len(head) % 32)
    return head + data


def main():
    os.makedirs(OUT, exist_ok=True)
    scalars = [kv("u8", 0, b"\x07"), kv("i8", 1, b"\xff"), kv("u16", 2, b"\1\0"), kv("i16", 3, b"\2\0"),
               kv("u32", 4, struct.pack("<I", 30)), kv("i32", 5, struct.pack("<i", -3)),
               kv("f32", 6, struct.pack("<f", 1e-5)), kv("b", 7, b"\1"), kv("general.architecture", 8, s("llama")),
               kv("u64", 10, struct.pack("<Q", 9)), kv("i64", 11, struct.pack("<q", -9)),
               kv("f64", 12, struct.pack("<d", 0.5))]
    arrays = [kv("tokens", 9, struct.pack("<IQ", 8, 3) + s("a") + s("bc") + s("<|im_end|>")),
              kv("types", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", 1, 3, 3)),
              kv("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + struct.pack("<2I", 1, 2))]
    f32 = struct.pack("<8f", *range(8))
    q4_1 = b"\x00\x3c\x00\x00" + bytes(range(16))
    q8_0 = b"\x00\x3c" + bytes(range(32))
    files = {
        "scalars.gguf": gguf(scalars, []),
        "arrays.gguf": gguf(arrays, []),
        "tensors.gguf": gguf(scalars[:2], [("w", 0, [4, 2], f32), ("q", 3, [32], q4_1), ("e", 8, [32], q8_0)]),
    }
    for name, blob in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
