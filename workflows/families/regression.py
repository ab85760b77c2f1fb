"""Regression (docs/families.md): optional log1p target transform around
[scaler] → [degree-2 expansion] → Ridge(svd), scored by MAE normalised by the training IQR."""

from __future__ import annotations

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_absolute_error
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import PolynomialFeatures, RobustScaler, StandardScaler

from workflows.families._common import check_finite_prediction, fit_predict_eval, iqr, options, result


def build(opts: dict[str, bool]):
    steps = []
    if opts["B"]:
        # d6: F swaps the scaler (inactive when B is off).
        steps.append(("scale", RobustScaler() if opts["F"] else StandardScaler()))
    if opts["C"]:
        # d6: E restricts to cross products (inactive when C is off).
        steps.append(("poly", PolynomialFeatures(degree=2, include_bias=False, interaction_only=opts["E"])))
    steps.append(("model", Ridge(alpha=10.0 if opts["D"] else 1.0, solver="svd")))
    inner = Pipeline(steps)
    if opts["A"]:
        return TransformedTargetRegressor(regressor=inner, func=np.log1p, inverse_func=np.expm1)
    return inner


def predict(data: dict, mask: str) -> np.ndarray:
    return fit_predict_eval(build(options(mask, "regression")), data)


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    check_finite_prediction(prediction)
    mae = mean_absolute_error(data["y_eval"], prediction)
    scale = iqr(data["y_train"])  # recomputed on every run, as the original does
    return result(1.0 / (1.0 + mae / scale), "MAE", mae, scale)


def truth(data: dict) -> dict:
    return {"y_eval": np.asarray(data["y_eval"])}
