"""The controls' figure: family-macro effect recovery against budget, one line per method, one panel
per track. Reads {"out": folder, "cells": [macro cells], "name": optional file name} as JSON on
standard input (as pipelines/evaluation/controls/outputs.ts and cohort/outputs.ts send them), writes
``<name>.svg`` and ``.png`` (default ``controls-recovery``) and prints their names as a JSON list.
Optional: a cell's ``low`` and ``high`` draw its interval as a band; ``colours`` ({method: colour})
fixes each method's colour (the same in every figure of a comparison); ``dodge`` shifts the methods
a little apart along the budget axis, so that equal lines stay visible (pipelines/evaluation/compare/).
Text is drawn as written: a ``$`` in a method's name is a dollar sign, never mathematics.
Deterministic like pipelines/analysis/figures.py: Agg and SVG backends, matplotlib's DejaVu fonts
drawn as paths, a fixed SVG id salt, no dates in the metadata."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams.update(
    {"svg.hashsalt": "wwref", "svg.fonttype": "path", "font.family": "DejaVu Sans", "font.size": 9, "text.parse_math": False}
)
TRACK_TITLES = {"four": "four options", "six": "paired six options", "six_added": "added six options"}
NAME = "controls-recovery"


def main() -> None:
    request = json.load(sys.stdin)
    cells = request["cells"]
    tracks = [t for t in TRACK_TITLES if any(c["track"] == t for c in cells)] + sorted({c["track"] for c in cells} - set(TRACK_TITLES))
    # one colour and marker per method in every panel, and one legend for the figure
    methods = sorted({c["method"] for c in cells})
    colours = plt.get_cmap("tab10")
    given = request.get("colours", {})
    style = {m: {"color": given.get(m, colours(k % 10)), "marker": "osD^v<>p"[k % 8]} for k, m in enumerate(methods)}
    # a cohort's agent ("agent: …") as a wide pale band under the controls: visible where it equals one
    for m in methods:
        if m.startswith("agent"):
            style[m].update(linewidth=4, alpha=0.5, zorder=1)
    figure, axes = plt.subplots(1, len(tracks), figsize=(4.2 * len(tracks), 3.6), squeeze=False)
    for axis, track in zip(axes[0], tracks, strict=True):
        of_track = [c for c in cells if c["track"] == track]
        budgets = sorted({c["budget"] for c in of_track})
        # the dodge: a fraction of the smallest gap between budgets, methods centred on the budget
        gap = min((b - a for a, b in zip(budgets, budgets[1:], strict=False)), default=1)
        step = 0.25 * gap / max(1, len(methods)) if request.get("dodge") else 0.0
        for k, method in enumerate(methods):
            mine = sorted((c for c in of_track if c["method"] == method), key=lambda c: c["budget"])
            if not mine:
                continue
            shift = (k - (len(methods) - 1) / 2) * step
            xs = [c["budget"] + shift for c in mine]
            axis.plot(xs, [c["recovery"] for c in mine], markersize=3, label=method, **style[method])
            if all("low" in c and "high" in c for c in mine):
                axis.fill_between(
                    xs, [c["low"] for c in mine], [c["high"] for c in mine], color=style[method]["color"], alpha=0.15, linewidth=0
                )
        axis.set_title(TRACK_TITLES.get(track, track))
        axis.set_xlabel("budget B (purchases beyond the two anchors)")
        axis.set_ylabel("effect recovery (family-macro)")
        axis.set_ylim(-0.02, 1.02)
        axis.set_xticks(budgets)  # budgets are whole numbers
        axis.grid(alpha=0.3)
    handles = [plt.Line2D([], [], markersize=4, label=m, **style[m]) for m in methods]
    if any("low" in c for c in cells):
        handles.append(plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.15, label="95 % interval"))
    # as many legend columns as fit under the panels (two a panel), the rows below them
    columns = max(1, min(len(handles), 2 * len(tracks)))
    rows = -(-len(handles) // columns)
    figure.legend(handles=handles, loc="lower center", ncol=columns, fontsize=7, frameon=False)
    figure.set_figheight(3.6 + 0.18 * rows)
    figure.tight_layout(rect=(0, (0.06 + 0.18 * rows) / (3.6 + 0.18 * rows), 1, 1))
    out = Path(request["out"])
    name = request.get("name", NAME)
    # each file written whole to a new private file, then renamed over its name (never through a link)
    for kind, options in (("svg", {"metadata": {"Date": None, "Creator": None}}), ("png", {"dpi": 150, "metadata": {"Software": None}})):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=kind, **options)
        final = out / f"{name}.{kind}"
        partial = out / f".{name}.{kind}.{os.getpid()}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(buffer.getvalue())
            os.replace(partial, final)
        except BaseException:
            partial.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
            raise
    print(json.dumps([f"{name}.svg", f"{name}.png"]))


if __name__ == "__main__":
    main()
