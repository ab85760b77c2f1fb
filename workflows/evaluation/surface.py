"""Masks as the estimators see them: indices (leftmost option most significant), ±1 coded feature rows,
Hamming distances, conditional-effect edges, and canonical representatives from declared equivalences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workflows.masks import LETTERS


def mask_string(index: int, width: int) -> str:
    return format(index, f"0{width}b")


def bits(width: int) -> np.ndarray:
    """(2^width, width) array of 0/1: row k holds the options of mask index k, option A first."""
    k = np.arange(2**width)[:, None]
    return (k >> np.arange(width - 1, -1, -1)[None, :]) & 1


def feature_rows(width: int, degree: int) -> np.ndarray:
    """Every mask's feature row: the constant 1, each option coded ±1, then for degree 2 each pair
    (i, j), i < j, in lexicographic order (the product of the coded bits)."""
    coded = (2 * bits(width) - 1).astype(np.float64)
    columns = [np.ones(2**width), *coded.T]
    if degree == 2:
        columns += [coded[:, i] * coded[:, j] for i in range(width) for j in range(i + 1, width)]
    return np.column_stack(columns)


def hamming(width: int, representatives: np.ndarray | None = None) -> np.ndarray:
    """Differing bits between every pair of masks (or of their representatives)."""
    b = bits(width)
    if representatives is not None:
        b = b[representatives]
    return (b[:, None, :] != b[None, :, :]).sum(axis=2).astype(np.float64)


def effect_edges(width: int) -> tuple[np.ndarray, np.ndarray]:
    """The width·2^(width−1) conditional-effect edges (low, high): for each bit from the least
    significant, every index without that bit paired with the index plus the bit."""
    low, high = [], []
    for b in range(width):
        for k in range(2**width):
            if not k & (1 << b):
                low.append(k)
                high.append(k | (1 << b))
    return np.array(low), np.array(high)


def representatives(width: int, equivalences: Sequence[dict]) -> np.ndarray:
    """The canonical representative of every mask: each declared inactive option set to 0 where its
    condition holds, repeated until nothing changes. ``equivalences`` are a plan's declarations
    ``{"option": "E", "inactive_when": {"C": 0}}``."""
    position = {letter: width - 1 - i for i, letter in enumerate(LETTERS[:width])}
    rules = [(position[rule["option"]], [(position[o], int(v)) for o, v in rule["inactive_when"].items()]) for rule in equivalences]
    reps = np.arange(2**width)
    for k in range(2**width):
        m = k
        changed = True
        while changed:
            changed = False
            for bit, when in rules:
                if m & (1 << bit) and all(((m >> b) & 1) == v for b, v in when):
                    m &= ~(1 << bit)
                    changed = True
        reps[k] = m
    return reps
