"""NumPy reference of the ridge estimators and the greedy variance design of the numerical-controls
specification (controls.md), for test/evaluation/sandbox-helpers.test.ts: the sandbox's plain-Python
helpers must agree with it. Run by the pinned runtime; reads {"cases": [...]} as JSON on stdin and
writes {"results": [...]} on stdout. Each case: {"width", "degree", "observations": [[index, utility],
...] (observation order)} for a ridge table, or {"width", "degree", "chosen": [index, ...], "count"}
for a design, or {"width", "degree", "chosen", "sequence"} for NumPy's scores along a given design, or {"width",
"method", "budget"} for the observation order of a published-grid control.
When the project's own NumPy estimators are on this branch, `fit_table` and `design`
are the two functions to point at them."""

from __future__ import annotations

import json
import sys

import numpy as np

PENALTIES = (1e-5, 1e-3, 0.1, 1.0, 10.0)


def features(width: int, degree: int) -> np.ndarray:
    index = np.arange(2**width)
    coded = np.stack([np.where((index >> (width - 1 - k)) & 1, 1.0, -1.0) for k in range(width)], axis=1)
    columns = [np.ones(2**width)] + [coded[:, k] for k in range(width)]
    if degree == 2:
        columns += [coded[:, i] * coded[:, j] for i in range(width) for j in range(i + 1, width)]
    return np.stack(columns, axis=1)


def ridge(rows: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    x_mean = rows[:, 1:].mean(axis=0)
    z = rows[:, 1:] - x_mean
    y_mean = y.mean()
    beta = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - y_mean))
    return np.concatenate([[y_mean - x_mean @ beta], beta])


def loo(rows: np.ndarray, y: np.ndarray, alpha: float) -> float:
    errors = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        errors[i] = (rows[i : i + 1] @ ridge(rows[keep], y[keep], alpha))[0] - y[i]
    return float(np.mean(errors**2))


def fit_table(width: int, degree: int, observations: list[list[float]]) -> dict:
    rows_all = features(width, degree)
    index = np.array([int(k) for k, _ in observations])
    y = np.array([float(v) for _, v in observations])
    losses = {a: loo(rows_all[index], y, a) for a in PENALTIES}
    alpha = min(PENALTIES, key=lambda a: (round(losses[a], 14), -a))
    table = np.clip(rows_all @ ridge(rows_all[index], y, alpha), 0.0, 1.0)
    table[index] = y
    return {"alpha": alpha, "observed_loo_mse": losses[alpha], "losses": [losses[a] for a in PENALTIES], "table": table.tolist()}


def design(width: int, degree: int, chosen: list[int], count: int) -> list[int]:
    rows_all = features(width, degree)
    p = rows_all.shape[1]
    rows = rows_all[chosen]
    taken = set(chosen)
    bought = []
    for _ in range(count):
        free = np.array([k for k in range(2**width) if k not in taken])
        if free.size == 0:
            break
        c = np.linalg.inv(rows.T @ rows + np.diag([1e-8] + [0.01] * (p - 1)))
        x = rows_all[free]
        scores = np.round(np.sum((x @ c) * x, axis=1), 10)
        pick = int(free[np.argmax(scores)])
        bought.append(pick)
        taken.add(pick)
        rows = np.vstack([rows, rows_all[pick]])
    return bought


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
