"""Graph link prediction (docs/families.md, six options only): networkx neighbourhood
scores of candidate pairs on the observed graph, a logistic model fit on the calibration pairs,
scored by ROC AUC on the test pairs."""

from __future__ import annotations

import networkx as nx
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from workflows.families._common import options, result

# Feature generators in their fixed column order (options A..E); each yields (u, v, value).
SCORES = (
    ("A", lambda g, pairs: ((u, v, len(list(nx.common_neighbors(g, u, v)))) for u, v in pairs)),
    ("B", nx.jaccard_coefficient),
    ("C", nx.adamic_adar_index),
    ("D", nx.resource_allocation_index),
    ("E", nx.preferential_attachment),
)


def _pairs(array: np.ndarray) -> list[tuple[int, int]]:
    return [(int(u), int(v)) for u, v in np.asarray(array)]


def predict(data: dict, mask: str) -> np.ndarray:
    opts = options(mask, "graph_link_prediction")
    graph = nx.Graph()
    graph.add_nodes_from(range(int(data["n_nodes"])))
    graph.add_edges_from(_pairs(data["observed_edges"]))

    fit_pairs = _pairs(data["fit_pairs"])
    pairs = fit_pairs + _pairs(data["test_pairs"])
    columns = [np.array([value for _, _, value in score(graph, pairs)], dtype=np.float64) for letter, score in SCORES if opts[letter]]
    features = np.column_stack(columns) if columns else np.zeros((len(pairs), 1), dtype=np.float64)

    fit_block, test_block = features[: len(fit_pairs)], features[len(fit_pairs) :]
    if opts["F"]:
        scaler = StandardScaler().fit(fit_block)
        fit_block, test_block = scaler.transform(fit_block), scaler.transform(test_block)

    model = LogisticRegression(C=1.0, solver="lbfgs", max_iter=2000, random_state=20260907)
    model.fit(fit_block, np.asarray(data["fit_labels"]))
    probabilities = np.ascontiguousarray(model.predict_proba(test_block)[:, 1], dtype=np.float64)
    if not np.all(np.isfinite(probabilities)):
        raise ValueError("Nonfinite link probabilities")
    return probabilities


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    value = roc_auc_score(np.asarray(data["test_labels"]), prediction)
    return result(value, "ROC_AUC", value)


def truth(data: dict) -> dict:
    return {"test_labels": np.asarray(data["test_labels"])}
