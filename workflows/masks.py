"""Configuration masks (docs/families.md): a string of 0/1, character i switches option i (A is leftmost)."""
from __future__ import annotations

LETTERS = "ABCDEF"


def parse_mask(mask: str, dimensions: int | None = None) -> dict[str, bool]:
    if not isinstance(mask, str) or len(mask) not in (4, 6) or any(ch not in "01" for ch in mask):
        raise ValueError(f"malformed mask {mask!r}: expected 4 or 6 characters of 0/1")
    if dimensions is not None and len(mask) != dimensions:
        raise ValueError(f"mask {mask!r} has {len(mask)} characters; this condition has {dimensions} options")
    return {LETTERS[i]: ch == "1" for i, ch in enumerate(mask)}
