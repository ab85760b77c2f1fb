"""Configuration masks (docs/families.md): a string of 0/1, character i switches option i (A is leftmost).
The option letters and each family's mask widths are contracts/families.json."""

from __future__ import annotations

from workflows.contracts import load

LETTERS = "".join(load("families")["option_letters"])
WIDTHS = sorted({width for family in load("families")["families"] for width in family["dimensions"]})


def parse_mask(mask: str, widths: list[int] | None = None) -> dict[str, bool]:
    """The switches of a mask of one of ``widths`` (any family's width when None)."""
    if not isinstance(mask, str) or len(mask) not in WIDTHS or any(ch not in "01" for ch in mask):
        raise ValueError(f"malformed mask {mask!r}: expected {' or '.join(map(str, WIDTHS))} characters of 0/1")
    if widths is not None and len(mask) not in widths:
        raise ValueError(f"mask {mask!r} has {len(mask)} characters; this condition has {' or '.join(map(str, widths))} options")
    return {LETTERS[i]: ch == "1" for i, ch in enumerate(mask)}
