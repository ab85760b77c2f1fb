"""Classification (docs/families.md): [signed log] → [StandardScaler] → [SelectPercentile]
→ [PCA] → LogisticRegression, scored by balanced accuracy."""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA
from sklearn.feature_selection import SelectPercentile, f_classif
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from workflows.families._common import check_finite_prediction, fit_predict_eval, options, result, signed_log


def build(opts: dict[str, bool]) -> Pipeline:
    steps = []
    if opts["A"]:
        steps.append(("signed_log", FunctionTransformer(signed_log)))
    if opts["B"]:
        steps.append(("scale", StandardScaler()))
    if opts["E"]:  # d6 only
        steps.append(("select", SelectPercentile(score_func=f_classif, percentile=50)))
    if opts["F"]:  # d6 only
        steps.append(("pca", PCA(n_components=0.95, svd_solver="full")))
    steps.append(
        (
            "model",
            LogisticRegression(
                C=0.05 if opts["D"] else 1.0, class_weight="balanced" if opts["C"] else None, solver="lbfgs", max_iter=3000, random_state=17
            ),
        )
    )
    return Pipeline(steps)


def predict(data: dict, mask: str) -> np.ndarray:
    # Labels come back in the dtype of classes_, i.e. y_train's dtype; the hash depends on it.
    return fit_predict_eval(build(options(mask, "classification")), data)


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    check_finite_prediction(prediction)
    value = balanced_accuracy_score(data["y_eval"], prediction)
    return result(value, "balanced_accuracy", value)


def truth(data: dict) -> dict:
    return {"y_eval": np.asarray(data["y_eval"])}
