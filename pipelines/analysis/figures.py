"""Figure files of `wwref report --figures DIR`, drawn with matplotlib (pinned in workflows/requirements.txt).

Reads one JSON request on standard input: {"out": folder, "conditions": [...]}, each condition with its
utilities in mask order, best mask and conditional effects (rows = options, columns = backgrounds in
ascending order), as pipelines/analysis/figures.ts sends them. Writes per condition
``<condition>.surface.svg/.png`` (utility per mask, bars coloured by utility, the best mask outlined)
and ``<condition>.effects.svg/.png`` (heat map of the conditional effects, a symmetric diverging
scale), and prints the written file names as a JSON list.

Deterministic output: the Agg and SVG backends, matplotlib's own DejaVu fonts, text drawn as paths,
a fixed SVG id salt and no date in the file metadata, so the same references give the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import Normalize, TwoSlopeNorm  # noqa: E402

matplotlib.rcParams.update(
    {
        "svg.hashsalt": "wwref",
        "svg.fonttype": "path",
        "font.family": "DejaVu Sans",
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)
DPI = 150
SVG_METADATA = {"Date": None, "Creator": None}
PNG_METADATA = {"Software": None}


def _replace(path: Path, data: bytes) -> None:
    """``data`` as the file ``path``: written to a new private file beside it (never through a link or into
    an existing file, whatever the folder holds), then renamed over the name."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _save(fig, out: Path, stem: str) -> list[str]:
    for kind, options in (("svg", {"metadata": SVG_METADATA}), ("png", {"dpi": DPI, "metadata": PNG_METADATA})):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=kind, **options)
        _replace(out / f"{stem}.{kind}", buffer.getvalue())
    plt.close(fig)
    return [f"{stem}.svg", f"{stem}.png"]


def surface(c: dict, out: Path) -> list[str]:
    d = c["dimensions"]
    utilities = c["utilities"]
    masks = [format(k, f"0{d}b") for k in range(len(utilities))]
    lo, hi = min(utilities), max(utilities)
    span = hi - lo
    floor = lo - (0.08 * span if span > 0 else 0.5)
    width = 5.2 if d <= 4 else 9.0
    fig, ax = plt.subplots(figsize=(width, 3.2), layout="constrained")
    colours = plt.get_cmap("viridis")(Normalize(lo, hi if span > 0 else lo + 1)(utilities))
    bars = ax.bar(range(len(utilities)), [u - floor for u in utilities], bottom=floor, color=colours, width=0.85)
    best = masks.index(c["best_mask"])
    for mask, bar in zip(masks, bars, strict=False):
        bar.set_gid(f"mask-{mask}")
    bars[best].set_edgecolor("#c2410c")
    bars[best].set_linewidth(1.5)
    ax.set_xticks(range(len(masks)), masks, rotation=90, family="DejaVu Sans Mono", fontsize=7 if d <= 4 else 5)
    ax.get_xticklabels()[best].set_color("#c2410c")
    ax.set_xlim(-0.6, len(masks) - 0.4)
    ax.set_ylim(floor, hi + (0.04 * span if span > 0 else 0.5))
    ax.set_ylabel("utility")
    ax.set_xlabel(f"mask (options {'ABCDEF'[:d]}, ascending)")
    ax.set_title(f"{c['condition']}: response surface ({c['family']}, best {c['best_mask']} = {hi:.4g})", fontsize=9)
    return _save(fig, out, f"{c['condition']}.surface")


def effects(c: dict, out: Path) -> list[str]:
    d = c["dimensions"]
    rows = c["effects"]  # d rows of 2**(d-1) effects
    scale = max((abs(v) for row in rows for v in row), default=0.0) or 1e-12
    cols = len(rows[0])
    fig, ax = plt.subplots(figsize=(5.2 if d <= 4 else 9.0, 0.45 * d + 1.3), layout="constrained")
    image = ax.imshow(rows, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -scale, scale), aspect="auto", interpolation="nearest")
    image.set_gid("effects")
    ax.set_yticks(range(d), list("ABCDEF"[:d]))
    ax.set_xticks(
        range(cols), [format(j, f"0{d - 1}b") for j in range(cols)], rotation=90, family="DejaVu Sans Mono", fontsize=7 if d <= 4 else 5
    )
    ax.set_xlabel("background: the other options' bits (ascending)")
    ax.set_ylabel("option switched on")
    ax.set_title(f"{c['condition']}: conditional effects Δ (max |Δ| {scale:.3g})", fontsize=9)
    bar = fig.colorbar(image, ax=ax, shrink=0.9)
    bar.set_label("Δ utility")
    return _save(fig, out, f"{c['condition']}.effects")


def main() -> None:
    request = json.load(sys.stdin)
    out = Path(request["out"])
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for c in request["conditions"]:
        written += surface(c, out)
        written += effects(c, out)
    json.dump(written, sys.stdout)


if __name__ == "__main__":
    main()
