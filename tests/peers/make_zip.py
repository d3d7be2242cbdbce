"""Writes a zip from a JSON spec, for tests that need entries ferry's own writer never makes (hostile
names, odd modes, symlinks, every method). Python's zipfile keeps names as given. Python 3.11's zipfile
does not know zstd (method 93): "zstd" entries are compressed by the zstd command (from a file, so that
each frame states its size), as ferry's layer format says (docs/packing.md, "zstd shards"): one frame per
"zstd_frame" bytes (4 MiB unless said), and after more than one frame the seek table of zstd's seekable
format. "zstd_table"
spoils it for the tests of the reader: "none" (left out), "truncated" (its last 3 bytes cut), "wrong" (frame
1's compressed size one more), "always" (even after one frame).

A "dictionary" entry is the shard's zstd dictionary: stored, with ferry's extra field 0x7a66 = 0x01 in both
headers. "zstd_dict": true compresses an entry
with the dictionary entry written last before it; "zstd_dict_hex" with other dictionary bytes.

usage: make_zip.py OUT.zip SPEC.json [COMMENT]
SPEC: [{"name": "..." or "name_hex": "...", "data": "...", "hex": false, "mode": 420, "symlink": false, "deflate": true,
        "zstd": false, "zstd_frame": 4194304, "zstd_table": "auto", "zstd_dict": false, "zstd_dict_hex": "",
        "dictionary": false, "zip64": false}, ...]
"""
import json
import os
import stat
import struct
import subprocess
import sys
import tempfile
import zipfile

ZIP_ZSTD = 93


FERRY_EXTRA = 0x7A66
SEEK_TABLE_MAGIC = 0x184D2A5E
SEEK_FOOTER_MAGIC = 0x8F92EAB1


def zstd_frame(piece, dictionary):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "piece")
        with open(path, "wb") as f:
            f.write(piece)
        argv = ["zstd", "-q", "-c", "-3", "--no-check"]
        if dictionary is not None:
            with open(path + ".dict", "wb") as f:
                f.write(dictionary)
            argv += ["-D", path + ".dict"]
        return subprocess.run(argv + [path], check=True, stdout=subprocess.PIPE).stdout


def seek_table(pieces, frames, how):
    records = [[len(c), len(p)] for p, c in zip(pieces, frames)]
    if how == "wrong":
        records[0][0] += 1
    body = b"".join(struct.pack("<II", c, d) for c, d in records) + struct.pack("<IBI", len(records), 0,
                                                                               SEEK_FOOTER_MAGIC)
    table = struct.pack("<II", SEEK_TABLE_MAGIC, len(body)) + body
    return table[:-3] if how == "truncated" else table


class ZstdCompressor:
    """Gathers an entry and compresses it at flush(), as zipfile's compressors are called."""

    frame = 4 << 20
    table = "auto"
    dictionary = None

    def __init__(self):
        self.data = bytearray()

    def compress(self, data):
        self.data += data
        return b""

    def flush(self):
        step = self.frame
        pieces = [bytes(self.data[i:i + step]) for i in range(0, len(self.data), step)] or [b""]
        frames = [zstd_frame(p, self.dictionary) for p in pieces]
        out = b"".join(frames)
        if self.table == "always" or (self.table != "none" and len(frames) > 1):
            out += seek_table(pieces, frames, self.table)
        return out


_check_compression = zipfile._check_compression
_get_compressor = zipfile._get_compressor
zipfile._check_compression = lambda c: None if c == ZIP_ZSTD else _check_compression(c)
zipfile._get_compressor = lambda c, level=None: ZstdCompressor() if c == ZIP_ZSTD else _get_compressor(c, level)


class RawInfo(zipfile.ZipInfo):
    """An entry whose name goes in as the bytes given, UTF-8 or not (zipfile would re-encode it)."""

    __slots__ = ("raw",)

    def _encodeFilenameFlags(self):
        return self.raw, self.flag_bits


with open(sys.argv[2]) as f:
    spec = json.load(f)
comment = sys.argv[3].encode() if len(sys.argv) > 3 else b""
dictionary = None
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.comment = comment
    for e in spec:
        raw = bytes.fromhex(e["name_hex"]) if "name_hex" in e else e["name"].encode()
        info = RawInfo(raw.decode("latin-1"), date_time=(1980, 1, 1, 0, 0, 0))
        info.raw = raw
        info.create_system = 3
        mode = e.get("mode", 0o644)
        kind = stat.S_IFLNK if e.get("symlink") else (stat.S_IFDIR if raw.endswith(b"/") else stat.S_IFREG)
        info.external_attr = (kind | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED if e.get("deflate", True) else zipfile.ZIP_STORED
        data = bytes.fromhex(e["data"]) if e.get("hex") else e.get("data", "").encode("utf-8", "surrogateescape")
        if e.get("zstd"):
            info.compress_type = ZIP_ZSTD
            info.extract_version = 63  # APPNOTE 6.3.7: zstd
            ZstdCompressor.frame = e.get("zstd_frame", 4 << 20)
            ZstdCompressor.table = e.get("zstd_table", "auto")
            ZstdCompressor.dictionary = (bytes.fromhex(e["zstd_dict_hex"]) if e.get("zstd_dict_hex")
                                         else dictionary if e.get("zstd_dict") else None)
        if e.get("dictionary"):
            dictionary = data
            info.compress_type = zipfile.ZIP_STORED
            info.extra = struct.pack("<HHB", FERRY_EXTRA, 1, 1)  # zipfile writes it in both headers
        if e.get("zip64"):
            with z.open(info, "w", force_zip64=True) as out:
                out.write(data)
        else:
            z.writestr(info, data)
