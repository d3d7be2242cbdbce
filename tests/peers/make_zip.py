"""Writes a zip from a JSON spec, for tests that need entries ferry's own writer never makes (hostile
names, odd modes, symlinks, both methods). Python's zipfile keeps names as given.

usage: make_zip.py OUT.zip SPEC.json [COMMENT]
SPEC: [{"name": "..." or "name_hex": "...", "data": "...", "hex": false, "mode": 420, "symlink": false, "deflate": true, "zip64": false}, ...]
"""
import json
import stat
import sys
import zipfile



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
        data = bytes.fromhex(e["data"]) if e.get("hex") else e.get("data", "").encode("utf-8", "surrogateescape")
        if e.get("zip64"):
            with z.open(info, "w", force_zip64=True) as out:
                out.write(data)
        else:
            z.writestr(info, data)
