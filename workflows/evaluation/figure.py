"""The controls' figure: family-macro effect recovery against budget, one line per method, one panel
per track. Reads {"out": folder, "cells": [macro cells], "name": optional file name} as JSON on
standard input (as pipelines/evaluation/controls/outputs.ts and cohort/outputs.ts send them), writes
``<name>.svg`` and ``.png`` (default ``controls-recovery``) and prints their names as a JSON list.
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

matplotlib.rcParams.update({"svg.hashsalt": "wwref", "svg.fonttype": "path", "font.family": "DejaVu Sans", "font.size": 9})
TRACK_TITLES = {"four": "four options", "six": "paired six options", "six_added": "added six options"}
NAME = "controls-recovery"


def main() -> None:
    request = json.load(sys.stdin)
    cells = request["cells"]
    tracks = [t for t in TRACK_TITLES if any(c["track"] == t for c in cells)] + sorted({c["track"] for c in cells} - set(TRACK_TITLES))
    # one colour and marker per method in every panel, and one legend for the figure
    methods = sorted({c["method"] for c in cells})
    colours = plt.get_cmap("tab10")
    style = {m: {"color": colours(k % 10), "marker": "osD^v<>p"[k % 8]} for k, m in enumerate(methods)}
    figure, axes = plt.subplots(1, len(tracks), figsize=(4.2 * len(tracks), 3.6), squeeze=False)
    for axis, track in zip(axes[0], tracks, strict=True):
        of_track = [c for c in cells if c["track"] == track]
        for method in methods:
            points = sorted((c["budget"], c["recovery"]) for c in of_track if c["method"] == method)
            if points:
                axis.plot([b for b, _ in points], [r for _, r in points], markersize=3, label=method, **style[method])
        axis.set_title(TRACK_TITLES.get(track, track))
        axis.set_xlabel("budget B (purchases beyond the two anchors)")
        axis.set_ylabel("effect recovery (family-macro)")
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    handles = [plt.Line2D([], [], markersize=4, label=m, **style[m]) for m in methods]
    figure.legend(handles=handles, loc="lower center", ncol=min(4, len(methods)), fontsize=7, frameon=False)
    figure.tight_layout(rect=(0, 0.12 if len(methods) > 4 else 0.07, 1, 1))
    out = Path(request["out"])
    name = request.get("name", NAME)
    # each file written whole to a new private file, then renamed over its name (never through a link)
    for kind, options in (("svg", {"metadata": {"Date": None, "Creator": None}}), ("png", {"dpi": 150, "metadata": {"Software": None}})):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=kind, **options)
        final = out / f"{name}.{kind}"
        partial = out / f".{name}.{kind}.{os.getpid()}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(buffer.getvalue())
        os.replace(partial, final)
    print(json.dumps([f"{name}.svg", f"{name}.png"]))


if __name__ == "__main__":
    main()
