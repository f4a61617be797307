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
                                         wall-time series has one point per row; each point read
                                         off the axes' tick labels is its row's step and value
  check_svg.py lines SVG LAYER          the line view shows LAYER (0: the last) of each kind,
                                         and its lines are that layer's cells >= 0.01
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
import re
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
    # each map's title names its layer and head, counted from 1 as data-layer and data-head
    titles = {t.text for t in root.iter(NS + "text") if t.text and re.fullmatch(r"layer \d+, head \d+", t.text)}
    want_titles = {f"layer {g.get('data-layer')}, head {g.get('data-head')}" for g in groups}
    check(titles == want_titles, f"{name}: the maps' titles are their layers and heads from 1 ({len(titles)} titles: "
          f"{sorted(titles)[:2]}...; want {len(want_titles)}: {sorted(want_titles)[:2]}...)")
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
    # their labels: each word as written, cut to 24 characters with "…" past them
    want = [w if len(w) <= 24 else w[:24] + "\u2026" for w in source.split(" ") if w] + ["</s>"]
    shown = [[t.text for t in g.iter(NS + "text")] for g in root.iter(NS + "g") if g.get("class") == "labels" and
             (g.get("data-kind"), g.get("data-axis")) in (("enc", "columns"), ("enc", "rows"), ("cross", "columns"))]
    wrong = [labels for labels in shown if labels != want]
    check(shown and not wrong, f"{name}: the source's labels on the encoder's rows and columns and the cross-attention's "
          f"columns, {len(shown)} axes: {want}" + (f"; one reads {wrong[0]}" if wrong else ""))


def curves(path, log_path):
    name = os.path.basename(path)
    root = ET.parse(path).getroot()
    series = {p.get("data-series"): p for p in root.iter(NS + "polyline")}
    rows = list(csv.DictReader(open(log_path)))
    for col in ("train_loss", "dev_loss", "bleu_dev", "bleu_test", "lr", "elapsed_s"):
        want = sum(1 for r in rows if logged(r, col) is not None)
        p = series.get(col)
        got = len(p.get("points").split()) if p is not None else 0
        stated = int(p.get("data-points")) if p is not None else 0
        check(got == want == stated, f"{name}: series {col}: {got} points (data-points {stated}), log.csv rows with a value {want}")
    if rows and "elapsed_s" in rows[0]:
        p = series.get("elapsed_s")
        got = len(p.get("points").split()) if p is not None else 0
        check(got == len(rows), f"{name}: as many wall-time points as log.csv has rows ({got}, {len(rows)})")
    curve_geometry(name, root, series, rows)


def logged(row, col):
    """A log.csv row's value in column col: a finite number, else None (empty, text, nan, inf)."""
    try:
        v = float(row.get(col))
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# Where each series is read: (panel from the top, axis), as the README describes the picture.
CURVE_AXES = {"train_loss": (0, "left"), "dev_loss": (0, "left"), "bleu_dev": (0, "right"),
              "bleu_test": (0, "right"), "lr": (1, "left"), "elapsed_s": (1, "right")}


def curve_geometry(name, root, series, rows):
    """Reads the picture as a person does: each point's value off its axis's tick labels (a
    straight line through the first and last tick), its step off the x axis's; they must be the
    log's, every point inside its panel, and wall time in the unit its axis title names."""
    frames = sorted((float(r.get("y")), float(r.get("x")), float(r.get("width")), float(r.get("height")))
                    for r in root.iter(NS + "rect") if r.get("fill") == "none" and r.get("stroke") == "#444444")
    if not check(len(frames) == 2, f"{name}: two panels framed ({len(frames)})"):
        return
    texts = [(float(t.get("x")), float(t.get("y")), t.get("text-anchor"), t.get("font-size"), t.text or "")
             for t in root.iter(NS + "text")]

    def number(s):
        try:
            return float(s)
        except ValueError:
            return None

    def ticks(panel, axis):   # [(value, pixel)] of an axis's tick labels
        top, left, width, height = frames[panel]
        if axis == "x":
            return [(number(s), x) for x, y, a, f, s in texts
                    if a == "middle" and f == "10" and abs(y - (top + height + 15)) < 0.02 and number(s) is not None]
        want_x, anchor = (left - 7, "end") if axis == "left" else (left + width + 7, "start")
        return [(number(s), y - 3.5) for x, y, a, f, s in texts   # both panels' axes share an x
                if a == anchor and f == "10" and abs(x - want_x) < 0.02 and number(s) is not None
                and top - 0.02 <= y - 3.5 <= top + height + 0.02]

    def reader(tk):   # pixel -> value through the first and last tick; None when under 2 ticks
        tk = sorted(tk)
        if len(tk) < 2 or tk[0][1] == tk[-1][1]:
            return None
        (v0, p0), (v1, p1) = tk[0], tk[-1]
        return lambda px: v0 + (px - p0) * (v1 - v0) / (p1 - p0), abs((v1 - v0) / (p1 - p0))

    titles = [t[4] for t in texts]
    hours = "wall time (h)" in titles
    unit = 3600.0 if hours else 60.0
    x_read = reader(ticks(1, "x"))
    worst, points, inside, axes_ok = 0.0, 0, True, x_read is not None
    upright = x_read is None or x_read[0](1) > x_read[0](0)   # steps grow rightwards
    for panel, axis in set(CURVE_AXES.values()):
        tk = sorted(ticks(panel, axis))   # values grow upwards: the pixel row falls
        upright &= all(b[1] < a[1] for a, b in zip(tk, tk[1:]))
    for col, (panel, axis) in CURVE_AXES.items():
        p = series.get(col)
        want = [(float(r["step"]), logged(r, col) / (unit if col == "elapsed_s" else 1)) for r in rows
                if logged(r, col) is not None]
        if p is None or not want:
            continue
        y_read = reader(ticks(panel, axis))
        if y_read is None or x_read is None:
            axes_ok = False
            continue
        top, left, width, height = frames[panel]
        drawn = [tuple(float(v) for v in xy.split(",")) for xy in p.get("points").split()]
        for (x, y), (step, value) in zip(drawn, want):
            inside &= left - 0.02 <= x <= left + width + 0.02 and top - 0.02 <= y <= top + height + 0.02
            # svg_num keeps 0.01 px: a point and a tick are each within 0.005 px of their place
            worst = max(worst, abs(y_read[0](y) - value) / (0.02 * y_read[1]),
                        abs(x_read[0](x) - step) / (0.02 * x_read[1]))
            points += 1
    check(axes_ok, f"{name}: every drawn series has an axis of at least two numbered ticks, and the x axis too")
    axis_ranges(name, rows, unit, ticks)
    check(upright, f"{name}: the tick labels grow upwards on every y axis and rightwards on the x axis")
    check(inside, f"{name}: all {points} points inside their panel")
    check(worst <= 1, f"{name}: each point's step and value read off the axes' ticks are log.csv's, wall time "
                      f"in {'hours' if hours else 'minutes'} as its axis says ({points} points, worst error "
                      f"{0.02 * worst:.4f} px, within 0.02)")


def axis_ranges(name, rows, unit, ticks):
    """Each axis as the README describes it: its ticks 1, 2 or 5 x 10^k apart, the smallest such
    step that covers its values in five; BLEU's, the learning rate's, wall time's and the steps'
    axes from 0; the loss axis starting within a step below the lowest loss; every y axis ending
    within a step above its highest value (the x axis at the last step)."""
    def value(r, col):
        v = logged(r, col)
        return v / unit if v is not None and col == "elapsed_s" else v

    def nice_steps(step):   # the 1, 2, 5 x 10^k just below and at step, or None if step is none
        k = math.floor(math.log10(step) + 1e-9)
        for m in (1, 2, 5, 10):
            if abs(step - m * 10 ** k) <= 1e-9 * step:
                return {1: 0.5, 2: 1, 5: 2, 10: 5}[m] * 10 ** k, step
        return None

    bad = []
    axes = {a: [c for c, pa in CURVE_AXES.items() if pa == a] for a in set(CURVE_AXES.values())}
    axes[(1, "x")] = ["step"]
    for (panel, axis), cols in sorted(axes.items()):
        vals = [v for r in rows for c in cols if (v := value(r, c)) is not None]
        tk = sorted(v for v, _ in ticks(panel, axis))
        if not vals or len(tk) < 2:
            continue
        from_zero = (panel, axis) != (0, "left")
        lo, hi = min(vals + [0.0]) if from_zero else min(vals), max(vals)
        step = (tk[-1] - tk[0]) / (len(tk) - 1)
        where = f"panel {panel} {axis} ({', '.join(cols)}: {lo:g} to {hi:g}, ticks {tk[0]:g} to {tk[-1]:g} by {step:g})"
        if hi - lo <= 1e-9 * max(1.0, abs(hi)):   # one value: a padded axis around it
            if not tk[0] <= lo and hi <= tk[-1]:
                bad.append(where)
            continue
        steps = nice_steps(step)
        if steps is None or (hi - lo) / steps[1] > 5 * (1 + 1e-9) or (hi - lo) / steps[0] <= 5 * (1 + 1e-9):
            bad.append(where + ": not the smallest 1, 2 or 5 x 10^k covering them in five")
        elif abs(tk[0] - (0.0 if from_zero else math.floor(lo / step + 1e-9) * step)) > 1e-6 * step:
            bad.append(where + (": not from 0" if from_zero else ": not from a step below the lowest"))
        elif axis == "x" and not tk[-1] <= hi + 1e-6 * step < tk[-1] + step:
            bad.append(where + ": not ending at the last step")
        elif axis != "x" and not hi - 1e-6 * step <= tk[-1] < hi + step:
            bad.append(where + ": not ending within a step above the highest")
    check(not bad, f"{name}: every axis's ticks 1, 2 or 5 x 10^k apart, covering its values in five steps; "
                   f"BLEU, learning rate, wall time and steps from 0, the losses' fitted"
                   + (": " + "; ".join(bad) if bad else ""))


HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]   # heads 1, 2, ...


def lines(path, layer):
    """The line view: per kind, one group of the wanted layer (0: the last), whose lines are
    exactly the heat maps' cells of that layer of weight >= 0.01, each in its head's colour, from
    its query's row to its key's row, with the cell's weight as opacity."""
    name = os.path.basename(path)
    root = ET.parse(path).getroot()
    cells = {}   # (kind, layer, head) -> rows of weights
    for g in root.iter(NS + "g"):
        if g.get("class") == "heatmap":
            cols = int(g.get("data-cols"))
            v = [float(r.get("fill-opacity")) for r in g.iter(NS + "rect")]
            cells[(g.get("data-kind"), int(g.get("data-layer")), int(g.get("data-head")))] = \
                [v[i:i + cols] for i in range(0, len(v), cols)]
    groups = [g for g in root.iter(NS + "g") if g.get("class") == "lines"]
    kinds = sorted(g.get("data-kind") for g in groups)
    if not check(kinds == ["cross", "dec", "enc"], f"{name}: one line view per kind of attention ({kinds})"):
        return
    last = {k: max(l for (kk, l, h) in cells if kk == k) for k in ("enc", "dec", "cross")}
    layers_ok, drawn, missing, extra, worst = True, 0, 0, 0, 0.0
    for g in groups:
        kind, shown = g.get("data-kind"), int(g.get("data-layer"))
        layers_ok &= shown == (int(layer) if int(layer) > 0 else last[kind])
        segs = [(float(e.get("y1")), float(e.get("y2")), e.get("stroke"), float(e.get("stroke-opacity")))
                for e in g.iter(NS + "line")]
        if not segs:
            missing += 1
            continue
        top = min(s[0] for s in segs) - 8   # query row 0 always has a weight >= 0.01 (it sums to 1)
        got = {}
        for y1, y2, colour, opacity in segs:
            key = (HEAD_COLOURS.index(colour) + 1, round((y1 - top) / 16 - 0.5), round((y2 - top) / 16 - 0.5))
            got[key] = opacity
        heads = [h for (k, l, h) in cells if k == kind and l == shown]
        for h in heads:
            for i, row in enumerate(cells[(kind, shown, h)]):
                for j, p in enumerate(row):
                    if abs(p - 0.01) < 1e-5:
                        got.pop((h, i, j), None)   # on the threshold: either way
                        continue
                    if p >= 0.01:
                        if (h, i, j) in got:
                            worst = max(worst, abs(got.pop((h, i, j)) - min(p, 1.0)))
                            drawn += 1
                        else:
                            missing += 1
        extra += len(got)
    check(layers_ok, f"{name}: the line views show {'the last layer' if int(layer) <= 0 else 'layer ' + layer} of each kind")
    kind_of = {"Encoder self-attention": "enc", "Decoder self-attention": "dec", "Encoder-decoder attention": "cross"}
    titled = {kind_of[m[1]]: m[2] for t in root.iter(NS + "text")
              if t.text and (m := re.fullmatch(r"(.*), layer (\d+)", t.text)) and m[1] in kind_of}
    shown = {g.get("data-kind"): g.get("data-layer") for g in groups}
    check(titled == shown, f"{name}: each line view's title names the layer it shows ({titled}, want {shown})")
    check(missing == 0 and extra == 0 and worst <= 0.0051,
          f"{name}: the lines are the heat maps' cells >= 0.01 of that layer ({drawn} drawn, {missing} missing, "
          f"{extra} not a cell; opacity = weight within {worst:.4f})")


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
    elif cmd == "lines":
        lines(*args)
    elif cmd == "alignment":
        alignment(*args)
    else:
        sys.exit(f"unknown command {cmd}")
    sys.exit(summary("svg"))
