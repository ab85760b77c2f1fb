"""The benchmark's public helpers for the calculation tool's native engine, importable as
``import wwb_helpers``: ``fit_surface``, ``suggest_experiments`` and ``features`` with the names,
defaults, argument checks and returned fields of WhatWorkedBench's published module.

Nothing numerical is written here: the fit is the project's ridge and the suggestions its greedy
variance design (workflows/evaluation/ridge.py and surface.py, the numerical controls of controls.md),
so a table from here and the controls' ridge table on the same observations are the same bits. The
checkout's ``workflows`` package (and the ``contracts`` folder beside it, read by workflows.masks) must
be importable.

``observations`` is a non-empty list of ``{"mask": "0101", "utility": 0.5}`` in acquisition order. A
mask given again must carry the same utility and counts once, at its first place: the fit and the
design run over the distinct masks in the order they were first seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral

import numpy as np

from workflows.evaluation import ridge
from workflows.evaluation.surface import feature_rows, mask_string

DEGREES = (1, 2)


def _whole(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _distinct(observations: object) -> tuple[int, dict[str, float]]:
    """(the mask width, {mask: utility} of the distinct masks in first-seen order), checked."""
    if not isinstance(observations, list) or not observations:
        raise ValueError('observations must be a non-empty list of {"mask": ..., "utility": ...}')
    seen: dict[str, float] = {}
    for row in observations:
        if not isinstance(row, Mapping) or "mask" not in row or "utility" not in row:
            raise ValueError(f'each observation is a dict with "mask" and "utility", not {row!r}')
        mask, value = row["mask"], row["utility"]
        if not isinstance(mask, str) or not 2 <= len(mask) <= 8 or set(mask) - {"0", "1"}:
            raise ValueError(f"a mask is a string of 2 to 8 characters 0/1, not {mask!r}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
            raise ValueError(f"the utility of {mask} must be a finite number in [0, 1], not {value!r}")
        if mask in seen and seen[mask] != value:
            raise ValueError(f"conflicting measurements of {mask}: {seen[mask]!r} and {value!r}")
        seen[mask] = float(value)
    if len({len(mask) for mask in seen}) > 1:
        raise ValueError("all masks must have the same number of options")
    return len(next(iter(seen))), seen


def features(m: int, degree: int = 1) -> tuple[list[str], np.ndarray]:
    """(every mask of ``m`` options by index, their coded feature rows): the constant, each option ±1,
    and for degree 2 each pair's product."""
    if degree not in DEGREES:
        raise ValueError(f"degree must be 1 (main effects) or 2 (pair effects), not {degree!r}")
    if not _whole(m) or m < 1:
        raise ValueError(f"the number of options must be a positive integer, not {m!r}")
    return [mask_string(k, m) for k in range(2**m)], feature_rows(m, degree)


def fit_surface(observations: list[dict], degree: int = 1) -> dict:
    """Every mask's ridge prediction (penalty by leave-one-out), clipped to [0, 1], observed masks at
    their utilities. The leave-one-out losses are over the observations only, not the hidden truth."""
    width, seen = _distinct(observations)
    masks, rows = features(width, degree)
    if len(seen) < 2:
        raise ValueError("fit_surface needs at least two distinct observed masks")
    observed = [int(mask, 2) for mask in seen]
    raw, chosen = ridge.table(rows, rows[observed], np.array(list(seen.values())))
    return {
        "predictions": {**dict(zip(masks, np.clip(raw, 0.0, 1.0).tolist(), strict=True)), **seen},
        "degree": degree,
        "ridge_alpha": chosen["alpha"],
        "observed_loo_mse": chosen["observed_loo_mse"],
        "observed_loo_mse_by_alpha": {alpha: chosen["loo_losses"][repr(alpha)] for alpha in ridge.PENALTIES},
        "observations_used": len(seen),
        "hidden_outcomes_used": 0,
    }


def suggest_experiments(observations: list[dict], count: int = 1, degree: int = 1) -> list[str]:
    """The next ``count`` masks of the greedy variance design after the observed ones (utilities unused)."""
    width, seen = _distinct(observations)
    masks, rows = features(width, degree)
    if not _whole(count) or not 0 <= count <= len(masks) - len(seen):
        raise ValueError(f"count must be a whole number from 0 to {len(masks) - len(seen)} (the masks not yet observed), not {count!r}")
    return [masks[k] for k in ridge.greedy_design(rows, [int(mask, 2) for mask in seen], int(count))]
