#!/usr/bin/env python3
"""Fetches NVIDIA's and PyTorch's real user-space libraries for the GPU-less tests, pinned and
verified, into a cache outside the tree, and prints the cache directory.

- libcuda.so.1: Debian's libcuda1 (NVIDIA driver 535, non-free), from deb.debian.org;
- libnccl.so.2: PyPI nvidia-nccl-cu13, the version the pinned torch requires;
- libc10_cuda.so, libc10.so: PyPI torch (read by HTTP Range from its 539 MB wheel: only the two
  members, each checked against the sha256 the wheel's RECORD gives it, pinned here);
- libcudart.so.13: PyPI nvidia-cuda-runtime, the version torch's cuda-toolkit pin requires.

Every archive downloaded whole is checked against its pinned size and sha256 before anything is
unpacked; every library placed is checked against its pinned sha256. A cache whose files all match
is used offline. VIGIL_NVIDIA_LIBS=/dir points at a prepared directory (checked the same way).
Cache: ${VIGIL_NVIDIA_CACHE:-${XDG_CACHE_HOME:-~/.cache}/vigil/nvidia}/<pins>/.

usage: scripts/fetch_nvidia_libs.py [--verify-only]
Exit 1, naming what and from where, when a file cannot be fetched or does not match its pin.
"""
import hashlib
import io
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile

PYPI = "https://files.pythonhosted.org/packages/"
DEBIAN = "https://deb.debian.org/debian-security/"


class Pin:
    """One library: where it comes from (the archive, its size and sha256 when fetched whole; the
    member inside it) and the sha256 of the library itself."""

    def __init__(self, name, url, member, sha256, archive_size=None, archive_sha256=None, links=()):
        self.name, self.url, self.member, self.sha256 = name, url, member, sha256
        self.archive_size, self.archive_sha256, self.links = archive_size, archive_sha256, links


PINS = [
    # Debian bookworm-security non-free, libcuda1 535.309.01-0+deb12u1 (Packages.xz of the suite).
    Pin("libcuda.so.535.309.01",
        DEBIAN + "pool/updates/non-free/n/nvidia-graphics-drivers/libcuda1_535.309.01-0+deb12u1_amd64.deb",
        "./usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.309.01",
        "e649879a93439c72083bfc255d87727dcea196413e47152c8ee96ba467935d86",
        archive_size=3003924,
        archive_sha256="36b96d4b10d3a51573f56cae5a4ac9bcf206c1f2613bba7063793ab3da47305f",
        links=("libcuda.so.1",)),
    # torch 2.15.0 requires nvidia-nccl-cu13==2.30.7 (its METADATA's Requires-Dist).
    Pin("libnccl.so.2",
        PYPI + "3f/34/c500f90c7ae641b8e0f98965b36b8a7ac79cc8b296e8d251fe3eb592ee54/"
               "nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl",
        "nvidia/nccl/lib/libnccl.so.2",
        "618968ee277041751512e619190132a9bdf351c3ce7129c73484f6ef441ad692",
        archive_size=215965170,
        archive_sha256="cefa7fdb9710efd0f39c5f1be1d61ff6fc9a996c451265bd7fbdcf9455ed4b50"),
    # torch 2.15.0 (+cu132), the default PyPI wheel for CPython 3.11: two members by Range reads.
    Pin("libc10_cuda.so",
        PYPI + "06/7d/57b7f46934e1148b436889e385693bfcb94ae047b3fe0b6015922e3b66f7/"
               "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch/lib/libc10_cuda.so",
        "b3bfc48277fb6c1e451c1be9101bb3a214445b14819be470da124dca54ab68c0"),
    Pin("libc10.so",
        PYPI + "06/7d/57b7f46934e1148b436889e385693bfcb94ae047b3fe0b6015922e3b66f7/"
               "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch/lib/libc10.so",
        "bb1fe5b9b16d125c2725891fd124ee50b6264691981f0e4aafb371549e2c6e59"),
    # torch's cuda-toolkit==13.2.2 [cudart] requires nvidia-cuda-runtime==13.2.86.*.
    Pin("libcudart.so.13",
        PYPI + "70/c6/8f8c5e893d183082ea78f973aebc7ebc845ee219d68bddac73b0f62490fe/"
               "nvidia_cuda_runtime-13.2.86-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia/cu13/lib/libcudart.so.13",
        "862020da24ec4db58470c8dfad08e8753b417c459c115326edf15e9f574c92e3",
        archive_size=2323576,
        archive_sha256="3498247680dfddce31bad102af7e3e26fc795342a3cac64722bb0fa95e7f60f0"),
]


class FetchError(Exception):
    pass


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir():
    if os.environ.get("VIGIL_NVIDIA_LIBS"):
        return os.environ["VIGIL_NVIDIA_LIBS"]
    base = os.environ.get("VIGIL_NVIDIA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vigil", "nvidia")
    # One directory per set of pins: changing a pin never mixes old and new files.
    key = hashlib.sha256("".join(p.name + p.sha256 for p in PINS).encode()).hexdigest()[:12]
    return os.path.join(base, key)


def problems(where):
    """What is missing or differs from the pins in WHERE; empty when all is in place."""
    out = []
    for p in PINS:
        path = os.path.join(where, p.name)
        if not os.path.isfile(path):
            out.append(f"{path} missing")
        elif sha256_of(path) != p.sha256:
            out.append(f"{path}: sha256 differs from the pinned {p.sha256}")
        for link in p.links:
            if os.path.realpath(os.path.join(where, link)) != os.path.realpath(path):
                out.append(f"{os.path.join(where, link)} does not point at {p.name}")
    return out


def opened(url, headers=None, method=None):
    """urlopen, its failures as FetchError naming the URL (a 404: the pin is gone)."""
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}, method=method), timeout=60)
    except urllib.error.HTTPError as e:
        gone = " (the pinned version is gone from the archive: update the pins)" if e.code == 404 else ""
        raise FetchError(f"cannot fetch {url}: HTTP {e.code}{gone}") from e
    except (urllib.error.URLError, OSError) as e:
        raise FetchError(f"cannot fetch {url}: {e}") from e


def download(url, dest, size, sha256):
    try:
        with opened(url) as r, open(dest, "wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
    except OSError as e:  # the connection dropped mid-body
        raise FetchError(f"cannot fetch {url}: {e}") from e
    got = os.path.getsize(dest)
    if got != size or sha256_of(dest) != sha256:
        raise FetchError(f"{url}: {got} bytes, sha256 {sha256_of(dest)}; pinned {size} bytes, sha256 {sha256}")


class RangeReader(io.RawIOBase):
    """A remote file read by HTTP Range requests, for zipfile: the central directory and the named
    members only."""

    def __init__(self, url):
        super().__init__()
        self.url, self.pos = url, 0
        with opened(url, method="HEAD") as r:
            self.size = int(r.headers.get("Content-Length", "0"))
        if self.size <= 0:
            raise FetchError(f"cannot fetch {url}: no Content-Length")

    def seekable(self):
        return True

    def readable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, buf):
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        with opened(self.url, {"Range": f"bytes={self.pos}-{self.pos + n - 1}"}) as r:
            data = r.read()
        if len(data) != n:
            raise FetchError(f"{self.url}: asked for {n} bytes at {self.pos}, got {len(data)} (no Range support?)")
        buf[:n] = data
        self.pos += n
        return n


def deb_member(deb, member, dest):
    """MEMBER of the data archive of the .deb DEB (an ar archive: debian-binary, control.tar.*,
    data.tar.xz), written to DEST."""
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise FetchError(f"{deb}: not a Debian package")
        while header := f.read(60):
            name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode())
            body = f.read(size)
            f.read(size % 2)
            if name == "data.tar.xz":
                with tarfile.open(fileobj=io.BytesIO(lzma.decompress(body))) as t:
                    src = t.extractfile(member)
                    if src is None:
                        raise FetchError(f"{deb}: no {member}")
                    with open(dest, "wb") as out:
                        shutil.copyfileobj(src, out)
                return
    raise FetchError(f"{deb}: no data.tar.xz")


def wheel_member(wheel, member, dest):
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


def fetch(where):
    os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(where) or ".") as tmp:
        staged = os.path.join(tmp, "libs")
        os.mkdir(staged)
        archives = {}
        for p in PINS:
            dest = os.path.join(staged, p.name)
            if p.archive_sha256 is None:  # too large to fetch whole: the member by Range reads
                wheel_member(io.BufferedReader(RangeReader(p.url), 1 << 20), p.member, dest)
            else:
                archive = archives.get(p.url)
                if archive is None:
                    archive = archives[p.url] = os.path.join(tmp, os.path.basename(p.url))
                    print(f"fetch_nvidia_libs: {p.url} ({p.archive_size} bytes)", file=sys.stderr)
                    download(p.url, archive, p.archive_size, p.archive_sha256)
                (deb_member if archive.endswith(".deb") else wheel_member)(archive, p.member, dest)
            if sha256_of(dest) != p.sha256:
                raise FetchError(f"{p.member} of {p.url}: sha256 {sha256_of(dest)}, pinned {p.sha256}")
            os.chmod(dest, 0o755)
            for link in p.links:
                os.symlink(p.name, os.path.join(staged, link))
        if os.path.isdir(where):
            shutil.rmtree(where)
        os.rename(staged, where)


def main():
    where = cache_dir()
    prepared = bool(os.environ.get("VIGIL_NVIDIA_LIBS"))
    wrong = problems(where)
    if not wrong:
        print(where)
        return 0
    if "--verify-only" in sys.argv[1:] or prepared:
        for w in wrong:
            print(f"fetch_nvidia_libs: {w}", file=sys.stderr)
        return 1
    try:
        fetch(where)
    except FetchError as e:
        print(f"fetch_nvidia_libs: {e}; run online once, or set VIGIL_NVIDIA_LIBS=/dir holding the pinned files",
              file=sys.stderr)
        return 1
    wrong = problems(where)
    for w in wrong:
        print(f"fetch_nvidia_libs: {w}", file=sys.stderr)
    if wrong:
        return 1
    print(where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
