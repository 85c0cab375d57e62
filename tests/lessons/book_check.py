"""Checks of the book that need no browser, for book_browser_test.sh:
  book_check.py links DIR      every href and src of every page resolves to a file in DIR (and
                               a #fragment to an id in it); nothing is fetched from elsewhere
  book_check.py pixels PNG...  each screenshot has a drawing: enough pixels that are not white
Only Python's standard library: PNG is decoded with zlib."""
import html.parser
import os
import struct
import sys
import zlib

MIN_INK = 0.01     # a figure covers far more than 1% of its image; a blank page has none
MIN_COLOUR = 0.002  # the data are drawn in colour (axes, grid and text are grey or black)


class Refs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id":
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, value))


def parse(path):
    p = Refs()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    return p


def check_links(folder):
    pages = [os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs if f.endswith(".html")]
    parsed = {os.path.abspath(p): parse(p) for p in pages}
    bad, count = [], 0
    for page, p in parsed.items():
        for tag, ref in p.refs:
            count += 1
            if "://" in ref or ref.startswith("//") or ref.startswith("data:"):
                bad.append(f"{page}: <{tag}> reaches outside the book: {ref}")
                continue
            target, _, fragment = ref.partition("#")
            path = os.path.abspath(os.path.join(os.path.dirname(page), target)) if target else page
            if not os.path.isfile(path):
                bad.append(f"{page}: {ref} names no file")
            elif fragment and path.endswith(".html") and fragment not in parsed[path].ids:
                bad.append(f"{page}: {ref} names no id in its page")
    for line in bad:
        print("FAILED:", line)
    print(f"{len(pages)} pages, {count} links, {len(bad)} broken")
    return not bad


def pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"{path}: depth {depth}, colour type {colour}"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):  # undo the row's filter (PNG spec, section 9)
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def check_pixels(paths):
    ok = True
    for path in paths:
        width, height, channels, rows = pixels(path)
        ink = colour = 0
        for row in rows:
            for x in range(0, len(row), channels):
                rgb = row[x:x + 3]
                ink += min(rgb) < 200
                colour += max(rgb) - min(rgb) > 60
        share, coloured = ink / (width * height), colour / (width * height)
        print(f"{os.path.basename(path)}: {width}x{height}, {share:.1%} drawn, "
              f"{coloured:.1%} in colour")
        if share < MIN_INK or coloured < MIN_COLOUR:
            print(f"FAILED: {path} is blank or has no data drawn ({ink} pixels drawn, "
                  f"{colour} in colour)")
            ok = False
    return ok


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "links" and len(sys.argv) == 3:
        sys.exit(0 if check_links(sys.argv[2]) else 1)
    if what == "pixels" and len(sys.argv) > 2:
        sys.exit(0 if check_pixels(sys.argv[2:]) else 1)
    sys.exit("usage: book_check.py links DIR | pixels PNG...")
