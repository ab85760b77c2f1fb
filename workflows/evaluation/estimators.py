"""The estimators fitted on observations someone else chose: an agent's estimator submission
(``ridge_main``, ``ridge_pair``, ``gp``) and the shared-estimator scores beside an agent's own (the
same three refitted on exactly its observations). They are the controls' estimators (ridge.py, gp.py),
so a control's table and the table of its estimator refitted on its observations are the same bits.

A request: ``width``, ``estimator`` and ``observations`` ([mask, utility] in acquisition order). The
result: ``prediction`` (every mask's value, by index: clipped to [0, 1], observed masks at their
utilities) and the ``parameters`` the estimator chose."""

from __future__ import annotations

import numpy as np

from workflows.evaluation import gp, ridge
from workflows.evaluation.surface import feature_rows, hamming

ESTIMATORS = {"ridge_main": 1, "ridge_pair": 2, "gp": 0}


def fit(request: dict) -> dict:
    estimator = request["estimator"]
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r} (estimators: {', '.join(ESTIMATORS)})")
    width = int(request["width"])
    masks = [m for m, _ in request["observations"]]
    if any(len(m) != width or set(m) - {"0", "1"} for m in masks) or len(set(masks)) != len(masks):
        raise ValueError(f"observations must be distinct masks of {width} options")
    if len(masks) < 2:
        raise ValueError("an estimator needs at least two observations")
    observed = [int(m, 2) for m in masks]
    y = np.array([float(u) for _, u in request["observations"]])
    degree = ESTIMATORS[estimator]
    if degree:
        rows = feature_rows(width, degree)
        raw, chosen = ridge.table(rows, rows[observed], y)
        parameters = {"degree": degree, **chosen}
    else:
        distances = hamming(width)
        hyper = gp.choose(distances, observed, y)
        raw, _ = gp.posterior(distances, observed, y, hyper)
        parameters = {"lengthscale": hyper.lengthscale, "nugget": hyper.nugget, "observed_loo_mse": hyper.observed_loo_mse}
    table = np.clip(raw, 0.0, 1.0)
    table[observed] = y
    return {"estimator": estimator, "prediction": table.tolist(), "parameters": parameters}
