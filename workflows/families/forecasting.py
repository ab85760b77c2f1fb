"""Forecasting (docs/families.md): one-step-ahead lag-Ridge forecast of the evaluation tail,
scored by MAE normalised by the IQR of the training prefix."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_absolute_error
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import RobustScaler, StandardScaler

from workflows.families._common import check_finite_prediction, iqr, options, result

FIRST_INDEX = 12  # every configuration fits from t = 12, even with a single lag


def predict(data: dict, mask: str) -> np.ndarray:
    opts = options(mask, "forecasting")
    series = np.asarray(data["series"], dtype=np.float64)
    cut = int(data["cut"])
    n = series.shape[0]

    levels = np.log1p(series) if opts["C"] else series.copy()
    if opts["F"]:  # d6: model first differences, element 0 is 0.0
        target = np.empty_like(levels)
        target[0] = 0.0
        target[1:] = levels[1:] - levels[:-1]
    else:
        target = levels

    t = np.arange(FIRST_INDEX, n)
    lags = 12 if opts["B"] else 1
    columns = [target[t - k] for k in range(1, lags + 1)]
    if opts["A"]:
        columns.append(t / cut)
    features = np.column_stack(columns)

    train = t < cut
    model = Pipeline(
        [
            ("scale", RobustScaler() if opts["E"] else StandardScaler()),
            ("model", Ridge(alpha=10.0 if opts["D"] else 1.0, solver="svd")),
        ]
    )
    model.fit(features[train], target[t[train]])
    forecast = model.predict(features[~train])
    if opts["F"]:  # undo the differencing with the previous realised level
        forecast = forecast + levels[t[~train] - 1]
    if opts["C"]:
        forecast = np.expm1(forecast)
    return forecast


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    check_finite_prediction(prediction)
    series = np.asarray(data["series"], dtype=np.float64)
    cut = int(data["cut"])
    mae = mean_absolute_error(series[cut:], prediction)
    scale = iqr(series[:cut])
    return result(1.0 / (1.0 + mae / scale), "one_step_MAE", mae, scale)


def truth(data: dict) -> dict:
    return {"series_eval": np.asarray(data["series"])[int(data["cut"]) :]}
