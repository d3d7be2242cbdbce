#!/usr/bin/env python3
"""Counts pixels of given colours in a PNG, with the standard library only (zlib, struct).

usage: png_colours.py FILE.png RRGGBB... ; prints {"width": w, "height": h, "RRGGBB": count, ...} as JSON.
A pixel counts for a colour when every channel is within 8 of it (screenshots may round a channel).
"""
import json
import struct
import sys
import zlib

TOLERANCE = 8


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    channels = 3 if colour == 2 else 4
    return width, height, channels, unfilter(zlib.decompress(b"".join(idat)), width, height, channels)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(raw, width, height, bpp):
    stride = width * bpp
    rows, prev, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                up_left = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + paeth(left, up, up_left)) & 0xFF
        rows.append(line)
        prev = line
    return rows


def main():
    path, wanted = sys.argv[1], sys.argv[2:]
    width, height, channels, rows = read_png(path)
    targets = [tuple(int(w[i:i + 2], 16) for i in (0, 2, 4)) for w in wanted]
    counts = {w: 0 for w in wanted}
    for line in rows:
        for x in range(0, width * channels, channels):
            r, g, b = line[x], line[x + 1], line[x + 2]
            for name, (tr, tg, tb) in zip(wanted, targets):
                if abs(r - tr) <= TOLERANCE and abs(g - tg) <= TOLERANCE and abs(b - tb) <= TOLERANCE:
                    counts[name] += 1
    print(json.dumps({"width": width, "height": height, **counts}))


if __name__ == "__main__":
    main()
