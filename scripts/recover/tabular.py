"""Tabular preparation + evaluation helpers (confirmed recipe of docs/recipes.md) used by the
concrete / energy_efficiency / dry_bean value searches.
"""

import csv

import numpy as np
from common import SHARED, conditions, npz_bytes, sha256
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import GroupShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler


def dedup(X, y):
    """Drop rows identical in all features and label, keep first occurrence (file order)."""
    seen = set()
    keep = []
    for i in range(len(X)):
        k = (X[i].tobytes(), y[i].tobytes() if hasattr(y[i], "tobytes") else y[i])
        if k not in seen:
            seen.add(k)
            keep.append(i)
    return X[keep], y[keep]


def split(X, y, seed=20260907):
    _, inv = np.unique(X, axis=0, return_inverse=True)
    groups = inv.reshape(-1)
    tr, ev = next(GroupShuffleSplit(n_splits=1, test_size=0.3, random_state=seed).split(X, y, groups))
    tr.sort()
    ev.sort()
    return X[tr], y[tr], X[ev], y[ev]


def regression_npz(X, y):
    xt, yt, xe, ye = split(X, y)
    return npz_bytes([("x_train", xt), ("y_train", yt), ("x_eval", xe), ("y_eval", ye)]), (xt, yt, xe, ye)


def reg_predict(xt, yt, xe, mask):
    a, b, c, d = (ch == "1" for ch in mask)
    steps = []
    if b:
        steps.append(StandardScaler())
    if c:
        steps.append(PolynomialFeatures(degree=2, include_bias=False))
    steps.append(Ridge(alpha=10.0 if d else 1.0, solver="svd"))
    model = make_pipeline(*steps)
    if a:
        model = TransformedTargetRegressor(regressor=model, func=np.log1p, inverse_func=np.expm1)
    model.fit(xt, yt)
    return model.predict(xe)


def reg_record(arrs, mask):
    xt, yt, xe, ye = arrs
    pred = reg_predict(xt, yt, xe, mask)
    mae = mean_absolute_error(ye, pred)
    q = np.quantile(yt, [0.25, 0.75])
    s = float(q[1] - q[0])
    return {
        "utility": 1.0 / (1.0 + mae / s),
        "native_value": float(mae),
        "scale": s,
        "prediction_sha256": sha256(np.ascontiguousarray(pred).tobytes()),
    }


def published_records(name):
    with open(f"{SHARED}/published/references/{name}.csv") as fh:
        return {r["mask"]: r for r in csv.DictReader(fh)}


def summary_check(name, arrs):
    """Compare with conditions.json data_summary (training stats) and free anchors."""
    c = conditions()[name]
    xt, yt, xe, ye = arrs
    ds = c["data_summary"]
    out = {}
    out["rows"] = (len(xt), len(xe)) == (ds["training"]["rows"], ds["evaluation_rows"])
    out["target_q"] = np.allclose(np.quantile(yt, [0, 0.25, 0.5, 0.75, 1]), ds["training_target_quantiles"], rtol=0, atol=1e-12)
    stds = np.quantile(xt.std(axis=0), [0, 0.25, 0.5, 0.75, 1])
    out["std_q_maxdiff"] = float(np.max(np.abs(stds - np.array(ds["training"]["feature_std_quantiles"]))))
    for fo in c["free_observations"]:
        r = reg_record(arrs, fo["mask"])
        out["anchor_" + fo["mask"]] = r["utility"] - fo["utility"]
    return out
