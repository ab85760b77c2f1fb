"""NumPy reference of the ridge estimators and the greedy variance design of the numerical-controls
specification (controls.md), for test/evaluation/sandbox-helpers.test.ts: the sandbox's plain-Python
helpers must agree with it. Run by the pinned runtime; reads {"cases": [...]} as JSON on stdin and
writes {"results": [...]} on stdout. Each case: {"width", "degree", "observations": [[index, utility],
...] (observation order)} for a ridge table, or {"width", "degree", "chosen": [index, ...], "count"}
for a design, or {"width", "degree", "chosen", "sequence"} for NumPy's scores along a given design, or {"width",
"method", "budget"} for the observation order of a published-grid control.
`fit_table` and `design` are the project's own estimators (workflows/evaluation/, the ones the
numerical controls use); `scores_along` recomputes the design's scores to show ties."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

# run as a script from test/support/: the repository root holds the workflows package
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from workflows.evaluation import ridge  # noqa: E402
from workflows.evaluation.surface import feature_rows  # noqa: E402


def features(width: int, degree: int) -> np.ndarray:
    return feature_rows(width, degree)


def fit_table(width: int, degree: int, observations: list[list[float]]) -> dict:
    rows_all = features(width, degree)
    index = np.array([int(k) for k, _ in observations])
    y = np.array([float(v) for _, v in observations])
    raw, chosen = ridge.table(rows_all, rows_all[index], y)
    table = np.clip(raw, 0.0, 1.0)
    table[index] = y
    losses = [chosen["loo_losses"][repr(a)] for a in ridge.PENALTIES]
    return {"alpha": chosen["alpha"], "observed_loo_mse": chosen["observed_loo_mse"], "losses": losses, "table": table.tolist()}


def design(width: int, degree: int, chosen: list[int], count: int) -> list[int]:
    return ridge.greedy_design(features(width, degree), list(chosen), count)


def scores_along(width: int, degree: int, chosen: list[int], sequence: list[int]) -> list[dict]:
    """For each mask of ``sequence`` bought in turn after ``chosen``: NumPy's rounded score of that mask,
    the largest rounded score, and the masks (ascending) whose score is within 1e-9 (relative) of it."""
    rows_all = features(width, degree)
    p = rows_all.shape[1]
    taken = list(chosen)
    steps = []
    for pick in sequence:
        free = np.array([k for k in range(2**width) if k not in taken])
        c = np.linalg.inv(rows_all[taken].T @ rows_all[taken] + np.diag([1e-8] + [0.01] * (p - 1)))
        scores = np.round(np.sum((rows_all[free] @ c) * rows_all[free], axis=1), 10)
        top = float(scores.max())
        near = [int(k) for k, s in zip(free, scores, strict=True) if s >= top - 1e-9 * max(1.0, abs(top))]
        steps.append({"score": float(scores[list(free).index(pick)]), "top": top, "near": near})
        taken.append(pick)
    return steps


def grid_order(width: int, method: str, budget: int) -> list[int]:
    """The observation order of a published-grid control: the anchors, then ``budget`` masks of the greedy
    design (``design_degree1``/``design_degree2``) or of the seeded random order (``random_degree2:S``)."""
    anchors = [0, 2**width - 1]
    if method.startswith("random_degree2:"):
        seed = int(method.split(":")[1])
        order = np.random.default_rng(20260907 + seed).permutation(np.arange(1, 2**width - 1))
        return anchors + [int(k) for k in order[:budget]]
    return anchors + design(width, int(method[-1]), anchors, budget)


def main() -> None:
    cases = json.load(sys.stdin)["cases"]
    results = []
    for case in cases:
        if "method" in case:
            results.append({"order": grid_order(case["width"], case["method"], case["budget"])})
        elif "sequence" in case:
            results.append({"steps": scores_along(case["width"], case["degree"], case["chosen"], case["sequence"])})
        elif "observations" in case:
            results.append(fit_table(case["width"], case["degree"], case["observations"]))
        else:
            results.append({"design": design(case["width"], case["degree"], case["chosen"], case["count"])})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
