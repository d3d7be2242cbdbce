#!/usr/bin/python3
"""Writes a synthetic environment shaped like a CUDA build of PyTorch into a site-packages directory.

    bench/make_torch_like_env.py SITE_PACKAGES

One distribution, `torchlike` (a dist-info with RECORD, so ferry's layer split keeps it one layer):
- torchlike/lib/: three shared libraries of 600, 360 and 240 MB whose bytes gzip -1 to about half:
  64 KiB blocks, each random bytes, then "code" (random bytes mapped onto a skewed alphabet: few distinct
  bytes, as opcodes and small immediates are), then a table of repeated 16-byte records (relocations, PLT
  stubs). The random bytes come from one 64 MiB pool read in sequence, so nothing repeats within any
  zstd window short of --long;
- 8,000 modules of 1-20 KB of Python text in 40 subpackages, each with __init__.py.
Deterministic (seeded) and fast: bytes operations on large blocks. Prints the total size, the file count and
the gzip -1 and zstd -3 ratios of the smallest library (the CLI tools, both at once).
Debian's /usr/bin/python3 suffices; nothing beyond the standard library.
"""
import hashlib
import base64
import os
import random
import subprocess
import sys
import time

SEED = 35
LIBRARIES = [("libtorchlike_cuda.so", 600_000_000), ("libtorchlike_cpu.so", 360_000_000),
             ("libcudnnlike.so.9", 240_000_000)]
SUBPACKAGES = 40
MODULES_PER_SUBPACKAGE = 200
BLOCK = 64 * 1024
POOL = 64 * 1024 * 1024

# Opcode-like alphabet: 16 byte values, the first ones far more common (about 3 bits a byte).
SKEW = bytes([0x48] * 6 + [0x89] * 4 + [0x00] * 4 + [0x8b] * 3 + [0x0f] * 2 + [0xff, 0xe8, 0x24, 0x44, 0xc3, 0x85, 0x74,
                                                                          0x75, 0xeb, 0x41, 0x83])
CODE_TABLE = bytes(SKEW[i % len(SKEW)] for i in range(256))


class pool_reader:
    """Random bytes from one seeded pool, read in sequence and wrapping around."""

    def __init__(self, seed):
        self.pool = hashlib.shake_128(f"torchlike-{seed}".encode()).digest(POOL)
        self.at = 0

    def take(self, n):
        if self.at + n > POOL:
            self.at = 0
        out = self.pool[self.at:self.at + n]
        self.at += n
        return out


def record_table(rng, n):
    # 16-byte records: an address that grows, a type, a symbol index: compressible, as .rela and .plt are.
    base = rng.randrange(1 << 32)
    rows = bytearray()
    for i in range(n // 16 + 1):
        rows += (base + 8 * i).to_bytes(8, "little") + (7).to_bytes(4, "little") + (i % 4096).to_bytes(4, "little")
    return bytes(rows[:n])


def write_library(path, size, rng, pool):
    tables = [record_table(rng, BLOCK) for _ in range(16)]
    digest = hashlib.sha256()
    with open(path, "wb", buffering=0) as f:
        written = 0
        chunk = []
        while written < size:
            n = min(BLOCK, size - written)
            r = n * rng.randrange(12, 18) // 100
            c = n * rng.randrange(30, 40) // 100
            t = n - r - c
            block = pool.take(r) + pool.take(c).translate(CODE_TABLE) + tables[rng.randrange(16)][:t]
            chunk.append(block)
            written += n
            if len(chunk) == 256 or written >= size:
                data = b"".join(chunk)
                digest.update(data)
                f.write(data)
                chunk = []
    return digest.digest()


WORDS = ("tensor grad module layer weight bias shape device dtype stride storage kernel dispatch autograd "
         "backward forward buffer param optim sched cuda stream event graph node edge hook state dict "
         "load save quant scale zero point channel batch norm conv linear pool embed attention mask").split()


def identifier(rng):
    return "_".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))


def snippet(rng):
    name = identifier(rng)
    args = ", ".join(dict.fromkeys(identifier(rng) for _ in range(rng.randrange(1, 5))))  # no name twice
    body = []
    for _ in range(rng.randrange(2, 9)):
        kind = rng.randrange(4)
        a, b = identifier(rng), identifier(rng)
        if kind == 0:
            body.append(f"    {a} = {b}.{identifier(rng)}({rng.randrange(1000)})")
        elif kind == 1:
            body.append(f"    if {a} is None:\n        raise ValueError(f\"{name}: expected {a} for {{{b}!r}}\")")
        elif kind == 2:
            body.append(f"    for {a} in range({b}.size({rng.randrange(4)})):\n        {b}[{a}] *= {rng.random():.4f}")
        else:
            body.append(f"    {a} = torch.{identifier(rng)}({b}, dim={rng.randrange(-2, 3)}, keepdim=True)")
    doc = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(6, 20)))
    return f"def {name}({args}):\n    \"\"\"{doc.capitalize()}.\"\"\"\n" + "\n".join(body) + f"\n    return {identifier(rng)}\n\n\n"


def write_modules(root, rng, record):
    snippets = [snippet(rng) for _ in range(2000)]
    header = "# Generated for ferry's first-start bench: a stand-in for torch's Python modules.\n" \
             "from __future__ import annotations\n\nimport torchlike as torch\n\n\n"
    files = 0
    for p in range(SUBPACKAGES):
        sub = os.path.join(root, f"sub{p:02d}")
        os.makedirs(sub)
        files += write_text(os.path.join(sub, "__init__.py"), f"from . import {', '.join(f'm{i:03d}' for i in range(5))}\n", record)
        for m in range(MODULES_PER_SUBPACKAGE):
            target = rng.randrange(1000, 20000)
            parts = [header]
            size = len(header)
            while True:  # whole functions only, so that every module compiles
                s = snippets[rng.randrange(len(snippets))]
                if size + len(s) > target and len(parts) > 1:
                    break
                parts.append(s)
                size += len(s)
            files += write_text(os.path.join(sub, f"m{m:03d}.py"), "".join(parts), record)
    return files


def write_text(path, text, record):
    data = text.encode()
    with open(path, "wb") as f:
        f.write(data)
    record(path, data)
    return 1


def ratio(command, path, size):
    p = subprocess.Popen(f"{command} < '{path}' | wc -c", shell=True, stdout=subprocess.PIPE)
    return lambda: int(p.communicate()[0]) / size


def main():
    if len(sys.argv) != 2:
        print("usage: make_torch_like_env.py SITE_PACKAGES", file=sys.stderr)
        return 2
    site = sys.argv[1]
    package = os.path.join(site, "torchlike")
    if os.path.exists(package):
        print(f"{package} exists already: give an empty site-packages", file=sys.stderr)
        return 2
    started = time.monotonic()
    rng = random.Random(SEED)
    pool = pool_reader(SEED)
    rows = []

    def record(path, data, digest=None):
        digest = digest or hashlib.sha256(data).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        rows.append(f"{os.path.relpath(path, site)},sha256={b64},{len(data) if data is not None else size_of(path)}")

    def size_of(path):
        return os.path.getsize(path)

    os.makedirs(os.path.join(package, "lib"))
    write_text(os.path.join(package, "__init__.py"),
               "from . import " + ", ".join(f"sub{p:02d}" for p in range(SUBPACKAGES)) + "\n__version__ = '2.5.1'\n",
               record)
    files = 1 + write_modules(package, rng, record)
    for name, size in LIBRARIES:
        path = os.path.join(package, "lib", name)
        record(path, None, write_library(path, size, rng, pool))
        files += 1
    info = os.path.join(site, "torchlike-2.5.1.dist-info")
    os.makedirs(info)
    for name, text in (("METADATA", "Metadata-Version: 2.1\nName: torchlike\nVersion: 2.5.1\n"),
                       ("WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"),
                       ("INSTALLER", "pip\n"), ("top_level.txt", "torchlike\n")):
        files += write_text(os.path.join(info, name), text, record)
    rows.append("torchlike-2.5.1.dist-info/RECORD,,")
    with open(os.path.join(info, "RECORD"), "w") as f:
        f.write("\n".join(rows) + "\n")
    files += 1

    written = time.monotonic() - started
    total = 0
    for d, _, names in os.walk(site):
        total += sum(os.path.getsize(os.path.join(d, n)) for n in names if "torchlike" in os.path.join(d, n))
    smallest = min(LIBRARIES, key=lambda l: l[1])
    path = os.path.join(package, "lib", smallest[0])
    gz, zs = ratio("gzip -1 -c", path, smallest[1]), ratio("zstd -3 -q -c", path, smallest[1])
    print(f"torchlike: {total / 1e6:.0f} MB in {files} files under {site}, written in {written:.1f} s")
    print(f"{smallest[0]} ({smallest[1] / 1e6:.0f} MB): gzip -1 {gz():.3f}, zstd -3 {zs():.3f} of its size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
