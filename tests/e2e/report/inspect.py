"""Checks for tests/e2e/test_report_chromium.sh.

  inspect.py selfcontained REPORT.html   every src/href is an in-page #anchor
                                         or a data: URI; no script, iframe,
                                         object, embed, img, external link,
                                         url( or @import
  inspect.py dom DOM.html ID...          each section id exists; every <svg>
                                         holds at least one drawn mark
                                         (class="mark" path/rect/circle/line);
                                         no <script> element
  inspect.py png SHOT.png                a valid PNG of real content: not tiny,
                                         not a single colour
Exits 1 with a message on the first problem."""
import re
import struct
import sys
import zlib
from html.parser import HTMLParser

MARK_TAGS = {"path", "rect", "circle", "line", "polyline", "polygon"}


class Walk(HTMLParser):
    def __init__(self):
        super().__init__()
        self.problems, self.ids, self.svgs, self.depth = [], set(), [], 0
        self.style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag in ("script", "iframe", "object", "embed", "img", "base"):
            self.problems.append(f"<{tag}> element present")
        if tag == "link" and not (a.get("rel") == "icon" and (a.get("href") or "").startswith("data:")):
            self.problems.append(f"<link {a}> references something")
        for k, v in attrs:
            v = v or ""
            if k in ("src", "href", "xlink:href", "action", "poster", "srcset") and not (v.startswith("#") or v.startswith("data:")):
                self.problems.append(f"<{tag} {k}={v!r}> points outside the file")
            if k == "style" and ("url(" in v or "@import" in v):
                self.problems.append(f"<{tag} style={v!r}> loads something")
        if tag == "style":
            self.style = True
        if tag == "svg":
            self.svgs.append(0)
            self.depth += 1
        elif self.depth and tag in MARK_TAGS and "mark" in (a.get("class") or "").split():
            self.svgs[-1] += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.depth -= 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.depth -= 1
        if tag == "style":
            self.style = False

    def handle_data(self, data):
        if self.style and ("url(" in data or "@import" in data):
            self.problems.append("<style> loads something (url( or @import)")


def walk(path):
    w = Walk()
    with open(path, encoding="utf-8") as f:
        w.feed(f.read())
    return w


def png_check(path):
    data = open(path, "rb").read()
    if len(data) < 10000 or data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"screenshot {path}: not a PNG of real content ({len(data)} bytes)")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    # Filtered scanlines: distinct byte values over the image say whether it
    # is one flat colour (a blank page filters to a handful of bytes).
    distinct = len(set(raw[:: max(1, len(raw) // 200000)]))
    if distinct < 16:
        sys.exit(f"screenshot {path}: looks blank ({distinct} distinct byte values)")
    print(f"screenshot ok: {w}x{h}, {len(data)} bytes, {distinct} distinct byte values")


mode = sys.argv[1]
if mode == "selfcontained":
    w = walk(sys.argv[2])
    if w.problems:
        sys.exit("not self-contained: " + "; ".join(w.problems[:5]))
    print("self-contained: no external references")
elif mode == "dom":
    w = walk(sys.argv[2])
    missing = [i for i in sys.argv[3:] if i not in w.ids]
    if missing:
        sys.exit(f"DOM lacks section ids: {missing}")
    if not w.svgs:
        sys.exit("DOM has no <svg>")
    empty = [i for i, n in enumerate(w.svgs) if n == 0]
    if empty:
        sys.exit(f"svg number(s) {empty} of {len(w.svgs)} drew no marks")
    if any("script" in p for p in w.problems):
        sys.exit("DOM has a <script> element (escaping failed)")
    print(f"dom ok: {len(sys.argv) - 3} sections, {len(w.svgs)} charts, marks per chart {w.svgs}")
elif mode == "png":
    png_check(sys.argv[2])
else:
    sys.exit("usage: inspect.py selfcontained|dom|png FILE ...")
