"""Writes a zip from a JSON spec, for tests that need entries ferry's own writer never makes (hostile
names, odd modes, symlinks, every method). Python's zipfile keeps names as given. Python 3.11's zipfile
does not know zstd (method 93): "zstd" entries are compressed by the zstd command, one frame per piece of
"zstd_frames" pieces (1: the whole entry in one frame).

usage: make_zip.py OUT.zip SPEC.json [COMMENT]
SPEC: [{"name": "..." or "name_hex": "...", "data": "...", "hex": false, "mode": 420, "symlink": false, "deflate": true,
        "zstd": false, "zstd_frames": 1, "zip64": false}, ...]
"""
import json
import stat
import subprocess
import sys
import zipfile

ZIP_ZSTD = 93


class ZstdCompressor:
    """Gathers an entry and compresses it at flush(), as zipfile's compressors are called."""

    frames = 1

    def __init__(self):
        self.data = bytearray()

    def compress(self, data):
        self.data += data
        return b""

    def flush(self):
        n = max(1, self.frames)
        step = -(-len(self.data) // n) or 1
        pieces = [bytes(self.data[i:i + step]) for i in range(0, len(self.data), step)] or [b""]
        return b"".join(subprocess.run(["zstd", "-q", "-c", "-3", "--no-check"], input=p, check=True,
                                       stdout=subprocess.PIPE).stdout for p in pieces)


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
        if e.get("zstd"):
            info.compress_type = ZIP_ZSTD
            info.extract_version = 63  # APPNOTE 6.3.7: zstd
            ZstdCompressor.frames = e.get("zstd_frames", 1)
        data = bytes.fromhex(e["data"]) if e.get("hex") else e.get("data", "").encode("utf-8", "surrogateescape")
        if e.get("zip64"):
            with z.open(info, "w", force_zip64=True) as out:
                out.write(data)
        else:
            z.writestr(info, data)
