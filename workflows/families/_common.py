"""Helpers shared by the family modules: mask parsing and the guards of docs/families.md"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from workflows.contracts import load
from workflows.masks import parse_mask

DIMENSIONS = {family["name"]: family["dimensions"] for family in load("families")["families"]}


def options(mask: str, family: str) -> dict[str, bool]:
    """Switches A..F of a mask. A four-option mask reads E and F as off, so the six-option builders
    reproduce the four-option workflow (spec 0.2: the E=F=0 subcube equals the four-option records).
    The mask must have one of the family's widths (6 only for beat and graph). Raises ValueError before
    any computation."""
    opts = parse_mask(mask, DIMENSIONS[family])
    opts.setdefault("E", False)
    opts.setdefault("F", False)
    return opts


def check_finite_prediction(prediction: Any) -> None:
    if isinstance(prediction, np.ndarray) and not np.all(np.isfinite(prediction)):
        raise ValueError("Nonfinite native predictions")


def check_utility(utility: float) -> float:
    if not (math.isfinite(utility) and 0.0 <= utility <= 1.0):
        raise ValueError("Invalid bounded utility")
    return utility


def result(utility: float, metric: str, value: float, scale: float | None = None, extras: dict | None = None) -> dict[str, Any]:
    return {
        "utility": check_utility(float(utility)),
        "native_metric": metric,
        "native_value": float(value),
        "normalization_scale": None if scale is None else float(scale),
        "extras": extras or {},
    }


def signed_log(x: np.ndarray) -> np.ndarray:
    """sign(x)·log1p(|x|), the stateless feature transform of option A (classification, clustering)."""
    return np.sign(x) * np.log1p(np.abs(x))


def iqr(values: np.ndarray) -> float:
    """q75 − q25 with numpy's default (linear) quantile: the MAE normalisation scale."""
    return float(np.quantile(values, 0.75) - np.quantile(values, 0.25))


def fit_predict_eval(model: Any, data: dict) -> np.ndarray:
    """Supervised families: fit on the training rows, predict the evaluation rows."""
    model.fit(data["x_train"], data["y_train"])
    return model.predict(data["x_eval"])
