#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seed corpus (small valid files covering every metadata type), the
USDT notes fuzzer's (small ELF files with a .note.stapsdt section laid out as GCC's <sys/sdt.h>
writes it) and the agent's request head fuzzer's (the heads its clients send).

With --exporter-toolkit GIT_DIR (a clone of github.com/prometheus/exporter-toolkit) it also writes
the web config fuzzer's seeds: exporter-toolkit's own files at commit EXPORTER_TOOLKIT_COMMIT,
every web/testdata/*.yml and *.yaml (the good and bad files of its tests) and the two examples,
docs/web-config.yml and web/web-config.yml, copied unchanged (Apache License 2.0)."""
import argparse
import os
import shutil
import subprocess
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "gguf")
USDT_OUT = os.path.join(HERE, "corpus", "usdt_notes")
HEAD_OUT = os.path.join(HERE, "corpus", "agent_request_head")
WEB_CONFIG_OUT = os.path.join(HERE, "corpus", "agent_web_config")
EXPORTER_TOOLKIT_COMMIT = "19a7c2d590c599b7318733bd00eed83fab3b8dad"  # "Improve linting (#424)"


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


def stapsdt_note(provider, name, args):
    """One SystemTap SDT note: owner "stapsdt", type 3, three addresses, then the strings."""
    desc = struct.pack("<3Q", 0x1530, 0x2150, 0x4060) + b"\0".join(x.encode() for x in (provider, name, args)) + b"\0"
    note = struct.pack("<3I", 8, len(desc), 3) + b"stapsdt\0" + desc
    return note + b"\0" * (-len(note) % 4)


def elf_with_sections(sections):
    """A 64-bit little-endian ELF file: a section-name table, then (name, type, bytes) sections."""
    names = b"\0.shstrtab\0" + b"".join(n.encode() + b"\0" for n, _, _ in sections)
    body, headers, name_at = names, [(0, 0, 0, 0), (1, 3, 64, len(names))], 11
    for name, stype, data in sections:
        headers.append((name_at, stype, 64 + len(body), len(data)))
        name_at += len(name) + 1
        body += data
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 0, 64 + len(body), 0, 64, 0, 0, 64, len(headers), 1)
    shdrs = b"".join(struct.pack("<IIQQQQIIQQ", n, t, 0, 0, off, size, 0, 0, 1, 0) for n, t, off, size in headers)
    return ehdr + body + shdrs


def usdt_seeds():
    os.makedirs(USDT_OUT, exist_ok=True)
    torch = stapsdt_note("pytorch", "malloc", "8@%rsi -1@%r12b 8@%rax -8@%rbp") + stapsdt_note("pytorch", "free", "8@%rsi")
    vigil = b"".join(stapsdt_note("vigil", n, "8@%rdi 8@%rsi") for n in ("alloc_block_alloc", "alloc_block_free"))
    files = {
        "allocator.elf": elf_with_sections([(".note.stapsdt", 7, torch + vigil)]),
        "collective.elf": elf_with_sections([(".text", 1, b"\x90" * 16),
                                             (".note.stapsdt", 7, stapsdt_note("vigil", "collective_begin", "8@%rdi"))]),
        "no_notes.elf": elf_with_sections([(".text", 1, b"\xc3")]),
    }
    for name, blob in files.items():
        with open(os.path.join(USDT_OUT, name), "wb") as f:
            f.write(blob)


def request_head_seeds():
    """Each seed is one byte (where the fuzzer cuts the head in two) and then the head."""
    os.makedirs(HEAD_OUT, exist_ok=True)
    crlf = lambda *lines: "".join(line + "\r\n" for line in lines + ("",)).encode()
    # Prometheus 3's default scrape_protocols as scrape.go's acceptHeader writes them, Go's
    # net/http order (Host, User-Agent, then sorted), basic_auth from the scrape config.
    accept = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
              "application/openmetrics-text;version=0.0.1;q=0.5,"
              "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
    files = {
        "bare_lf": b"\x00GET /readyz?x=1 HTTP/1.0\n\n",
        "kubelet_probe": b"\x05" + crlf("GET /healthz HTTP/1.1", "Host: 10.0.0.1:9435", "User-Agent: kube-probe/1.32",
                                         "Connection: close"),
        "prometheus_scrape": b"\x10" + crlf(
            "GET /metrics HTTP/1.1", "Host: 10.0.0.1:9435", "User-Agent: Prometheus/3.0.0",
            "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            "Accept-Encoding: gzip"),
        "prometheus_basic_auth": b"\x2a" + crlf(
            "GET /metrics HTTP/1.1", "Host: 10.0.0.1:9435", "User-Agent: Prometheus/3.0.1", "Accept: " + accept,
            "Accept-Encoding: gzip", "Authorization: Basic cHJvbWV0aGV1czpzZWNyZXQ=",
            "X-Prometheus-Scrape-Timeout-Seconds: 10"),
        # curl 7.88 (Debian 12): curl http://localhost:9435/metrics, and with -u prometheus:secret.
        "curl": b"\x07" + crlf("GET /metrics HTTP/1.1", "Host: localhost:9435", "User-Agent: curl/7.88.1", "Accept: */*"),
        "curl_basic_auth": b"\x33" + crlf("GET /metrics HTTP/1.1", "Host: localhost:9435",
                                           "Authorization: Basic cHJvbWV0aGV1czpzZWNyZXQ=", "User-Agent: curl/7.88.1",
                                           "Accept: */*"),
    }
    for name, blob in files.items():
        with open(os.path.join(HEAD_OUT, name), "wb") as f:
            f.write(blob)


def web_config_seeds(git_dir):
    def git(*args):
        return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True).stdout

    names = git("ls-tree", "--name-only", EXPORTER_TOOLKIT_COMMIT, "web/testdata/").decode().split()
    sources = [n for n in names if n.endswith((".yml", ".yaml"))]
    targets = [os.path.basename(n) for n in sources]
    sources += ["docs/web-config.yml", "web/web-config.yml"]
    targets += ["docs_web-config.yml", "web_web-config.yml"]
    shutil.rmtree(WEB_CONFIG_OUT, ignore_errors=True)
    os.makedirs(WEB_CONFIG_OUT)
    for source, target in zip(sources, targets):
        with open(os.path.join(WEB_CONFIG_OUT, target), "wb") as f:
            f.write(git("show", EXPORTER_TOOLKIT_COMMIT + ":" + source))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exporter-toolkit", metavar="GIT_DIR", help="a clone of prometheus/exporter-toolkit")
    args = parser.parse_args()
    if args.exporter_toolkit:
        web_config_seeds(args.exporter_toolkit)
    request_head_seeds()
    usdt_seeds()
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
