"""Clustering (docs/families.md): [signed log] → [StandardScaler] → [PCA] → KMeans over all
rows, scored by NMI against the labels."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.metrics import normalized_mutual_info_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from workflows.families._common import check_finite_prediction, options, result, signed_log


def build(opts: dict[str, bool], n_clusters: int) -> Pipeline:
    steps = []
    if opts["A"]:
        steps.append(("signed_log", FunctionTransformer(signed_log)))
    if opts["B"]:
        steps.append(("scale", StandardScaler()))
    if opts["C"]:
        # d6: E whitens (inactive when C is off).
        steps.append(("pca", PCA(n_components=0.95, svd_solver="full", whiten=opts["E"])))
    steps.append(
        (
            "kmeans",
            KMeans(
                n_clusters=n_clusters,
                init="random" if opts["F"] else "k-means++",
                n_init=10 if opts["D"] else 1,
                max_iter=300,
                random_state=17,
                algorithm="lloyd",
            ),
        )
    )
    return Pipeline(steps)


def predict(data: dict, mask: str) -> np.ndarray:
    opts = options(mask, "clustering")
    model = build(opts, int(data["n_clusters"]))
    # KMeans labels_ are int32; their numbering is hashed as is.
    return model.fit_predict(data["x"])


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    check_finite_prediction(prediction)
    value = normalized_mutual_info_score(data["y"], prediction, average_method="arithmetic")
    return result(value, "NMI", value)


def truth(data: dict) -> dict:
    return {"y": np.asarray(data["y"])}
