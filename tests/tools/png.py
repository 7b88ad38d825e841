#!/usr/bin/python3
"""PNG helpers for tests/tools/browser.sh (Python standard library only).

    png.py colours FILE.png RRGGBB...   each colour covers at least 50 pixels
                                        (prints the counts; status 1 if not)
    png.py palette IN.png OUT.png       rewrite with a palette of at most 256
                                        colours (a small screenshot for docs/)
"""
import collections
import struct
import sys
import zlib


def read(path):
    """(width, height, rows of b"rgb") of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s: not a PNG" % path)
    p, idat = 8, b""
    while p < len(data):
        n, typ = struct.unpack(">I4s", data[p:p + 8])
        body = data[p + 8:p + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError("%s: not 8-bit RGB(A)" % path)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        p += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, None, []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i] if prev else 0
            c = prev[i - bpp] if prev and i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([bytes(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def chunk(typ, data):
    return struct.pack(">I", len(data)) + typ + data + struct.pack(">I", zlib.crc32(typ + data))


def palette(src, dst):
    w, h, rows = read(src)
    pal = [c for c, _ in collections.Counter(px for r in rows for px in r).most_common(256)]
    idx = {c: i for i, c in enumerate(pal)}

    def near(c):
        if c not in idx:
            idx[c] = min(range(len(pal)), key=lambda i: sum((a - b) ** 2 for a, b in zip(pal[i], c)))
        return idx[c]
    raw = b"".join(b"\0" + bytes(near(c) for c in r) for r in rows)
    with open(dst, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)) +
                chunk(b"PLTE", b"".join(pal)) + chunk(b"IDAT", zlib.compress(raw, 9)) +
                chunk(b"IEND", b""))


def colours(path, want):
    w, h, rows = read(path)
    count = collections.Counter(px for r in rows for px in r)
    got = {c: count.get(bytes.fromhex(c), 0) for c in want}
    print("     | pixels of %s out of %d" % (", ".join("#%s: %d" % kv for kv in got.items()), w * h))
    return all(v >= 50 for v in got.values())


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "palette":
        palette(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "colours":
        sys.exit(0 if colours(sys.argv[2], sys.argv[3:]) else 1)
    else:
        sys.exit(__doc__)
