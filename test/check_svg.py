#!/usr/bin/env python3
"""test/check_svg.py — checks of the pictures the programs draw (test/test_pictures.sh).

  check_svg.py render SVG...            well-formed XML; rsvg-convert renders it to a PNG of
                                         the width and height it states, whose pixels vary
  check_svg.py heatmaps SVG [MAPS.json]  every heat map's rows sum to 1; with MAPS.json (the
                                         probabilities model_attention returned, written by
                                         build/test_attention) each cell equals its value
  check_svg.py words SVG                 a --attention-words picture: encoder and cross-attention
                                         columns are the source's words + </s>
  check_svg.py curves SVG LOG.csv        one point per log row with a value, per series; the
                                         wall-time series has one point per row
  check_svg.py alignment IN OUT          ./translate --alignment: "text ||| i-j ...", i within the
                                         input line's words, j within the translation's, every
                                         target word at most once; an empty line gives " ||| "

Prints PASS/FAIL per check and "svg: N passed, M failed"; exits 1 on a failure. Uses only the
standard library (xml.etree, zlib for the PNG) and rsvg-convert (Debian's librsvg2-bin).
"""
import csv
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

from checks import check, summary

NS = "{http://www.w3.org/2000/svg}"


def png_pixels(path):
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA or RGB PNG, filters undone."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG {ihdr}"
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def render(path):
    name = os.path.basename(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        check(False, f"{name}: well-formed XML ({e})")
        return
    check(root.tag == NS + "svg", f"{name}: well-formed XML, root <svg>")
    width, height = int(float(root.get("width"))), int(float(root.get("height")))
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "out.png")
        r = subprocess.run(["rsvg-convert", path, "-o", png], capture_output=True, text=True)
        if not check(r.returncode == 0, f"{name}: rsvg-convert renders it ({r.stderr.strip()[:200]})"):
            return
        w, h, rows, bpp = png_pixels(png)
        check((w, h) == (width, height), f"{name}: PNG {w}x{h}, the SVG states {width}x{height}")
        pixels = {row[i:i + bpp] for row in rows[::3] for i in range(0, len(row), bpp * 3)}
        dark = sum(1 for row in rows for i in range(0, len(row), bpp) if row[i] < 128)
        check(len(pixels) > 10 and dark > 0.001 * w * h,
              f"{name}: not blank ({len(pixels)} distinct colours sampled, {dark} dark pixels of {w * h})")


def heatmaps(path, maps_path=None):
    name = os.path.basename(path)
    root = ET.parse(path).getroot()
    maps = json.load(open(maps_path)) if maps_path else None
    groups = [g for g in root.iter(NS + "g") if g.get("class") == "heatmap"]
    worst_sum, worst_cell, cells, shape_ok = 0.0, 0.0, 0, True
    for g in groups:
        kind, layer, head = g.get("data-kind"), int(g.get("data-layer")), int(g.get("data-head"))
        rows, cols = int(g.get("data-rows")), int(g.get("data-cols"))
        values = [float(r.get("fill-opacity")) for r in g.iter(NS + "rect")]
        if len(values) != rows * cols:
            shape_ok = False
            continue
        cells += len(values)
        for i in range(rows):
            worst_sum = max(worst_sum, abs(sum(values[i * cols:(i + 1) * cols]) - 1))
        if maps:
            H, S, T = maps["H"], maps["S"], maps["T"]
            R, C = {"enc": (S, S), "dec": (T, T), "cross": (T, S)}[kind]
            shape_ok &= (rows, cols) == (R, C)
            base = ((layer - 1) * H + (head - 1)) * R * C
            want = maps[kind][base:base + R * C]
            worst_cell = max([worst_cell] + [abs(a - b) for a, b in zip(values, want)])
    check(len(groups) > 0 and shape_ok, f"{name}: {len(groups)} heat maps, each rows x cols cells")
    check(worst_sum < 1e-4, f"{name}: every heat-map row sums to 1 (max |sum - 1| {worst_sum:.1e}, {cells} cells)")
    if maps:
        n_want = maps["H"] * (maps["n_enc"] + 2 * maps["n_dec"])
        check(len(groups) == n_want, f"{name}: one map per layer and head of each kind ({len(groups)}, want {n_want})")
        check(worst_cell < 1e-6, f"{name}: each cell equals model_attention's probability (max |diff| {worst_cell:.1e} < 1e-6)")


def words(path):
    name = os.path.basename(path)
    root = ET.parse(path).getroot()
    source = next(g for g in root.iter(NS + "g") if g.get("data-source") is not None).get("data-source")
    n = len(source.split(" ")) - source.split(" ").count("") + 1
    groups = [g for g in root.iter(NS + "g") if g.get("class") == "heatmap" and g.get("data-kind") in ("enc", "cross")]
    cols = {int(g.get("data-cols")) for g in groups}
    check(groups and cols == {n}, f"{name}: encoder and cross-attention columns are the source's words + </s> ({cols}, want {n})")


def curves(path, log_path):
    name = os.path.basename(path)
    root = ET.parse(path).getroot()
    series = {p.get("data-series"): p for p in root.iter(NS + "polyline")}
    rows = list(csv.DictReader(open(log_path)))

    def finite(v):
        try:
            return math.isfinite(float(v))
        except (TypeError, ValueError):
            return False

    for col in ("train_loss", "dev_loss", "bleu_dev", "bleu_test", "lr", "elapsed_s"):
        want = sum(1 for r in rows if finite(r.get(col)))
        p = series.get(col)
        got = len(p.get("points").split()) if p is not None else 0
        stated = int(p.get("data-points")) if p is not None else 0
        check(got == want == stated, f"{name}: series {col}: {got} points (data-points {stated}), log.csv rows with a value {want}")
    p = series.get("elapsed_s")
    got = len(p.get("points").split()) if p is not None else 0
    check(got == len(rows), f"{name}: as many wall-time points as log.csv has rows ({got}, {len(rows)})")


def alignment(in_path, out_path):
    lines = open(in_path, encoding="utf-8").read().split("\n")[:-1]
    outs = open(out_path, encoding="utf-8").read().split("\n")[:-1]
    if not check(len(lines) == len(outs), f"alignment: one output line per input line ({len(outs)}, {len(lines)})"):
        return
    ok, pairs_seen = True, 0
    for src, out in zip(lines, outs):
        text, sep, pairs = out.rpartition(" ||| ")
        ns, nt = len([w for w in src.split(" ") if w]), len([w for w in text.split(" ") if w])
        seen = set()
        for p in pairs.split():
            i, j = (int(x) for x in p.split("-"))
            ok &= 0 <= i < ns and 0 <= j < nt and j not in seen
            seen.add(j)
            pairs_seen += 1
        ok &= sep == " ||| " and (src.strip() != "" or (text == "" and pairs == ""))
        ok &= nt == 0 or ns == 0 or len(seen) == nt   # every target word aligned once
    check(ok, f"alignment: {pairs_seen} pairs, source index first within the line's words, each target word once; empty line ' ||| '")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "render":
        for a in args:
            render(a)
    elif cmd == "heatmaps":
        heatmaps(*args)
    elif cmd == "words":
        words(*args)
    elif cmd == "curves":
        curves(*args)
    elif cmd == "alignment":
        alignment(*args)
    else:
        sys.exit(f"unknown command {cmd}")
    sys.exit(summary("svg"))
