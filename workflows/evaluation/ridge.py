"""Ridge on ±1 coded features (degree 1: main effects; degree 2: main and pair effects) with the
penalty chosen by exact leave-one-out, and the greedy variance design that buys masks for it."""

from __future__ import annotations

import numpy as np

PENALTIES = (1e-5, 1e-3, 0.1, 1.0, 10.0)
#: The design's regularisation: almost none on the constant column, 0.01 on every other.
DESIGN_CONSTANT_RIDGE = 1e-8
DESIGN_RIDGE = 0.01


def fit(rows: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """The coefficients of every column (the intercept first), fitted on centred columns: the constant
    column is not penalised."""
    columns = rows[:, 1:]
    mean_x = columns.mean(axis=0)
    centred = columns - mean_x
    mean_y = y.mean()
    beta = np.linalg.solve(centred.T @ centred + alpha * np.eye(columns.shape[1]), centred.T @ (y - mean_y))
    return np.concatenate([[mean_y - mean_x @ beta], beta])


def predict(coefficients: np.ndarray, rows: np.ndarray) -> np.ndarray:
    # one product over all columns, the intercept's included: the published tables' bits
    return rows @ coefficients


def loo_loss(rows: np.ndarray, y: np.ndarray, alpha: float) -> float:
    """Mean squared error of predicting each observation from the others (in order)."""
    errors = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        errors[i] = predict(fit(rows[keep], y[keep], alpha), rows[i : i + 1])[0] - y[i]
    return float(np.mean(errors**2))


def choose_penalty(rows: np.ndarray, y: np.ndarray) -> tuple[float, float, dict[str, float]]:
    """(alpha, its loss, every penalty's loss): the least loss rounded to 14 decimals, ties to the larger alpha."""
    if len(y) < 2:
        raise ValueError("ridge needs at least two observations")
    losses = {alpha: loo_loss(rows, y, alpha) for alpha in PENALTIES}
    alpha = min(PENALTIES, key=lambda a: (round(losses[a], 14), -a))
    return alpha, losses[alpha], {repr(a): loss for a, loss in losses.items()}


def table(rows_all: np.ndarray, observed_rows: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, dict]:
    """Every mask's unclipped prediction from the observations, and what was chosen."""
    alpha, loss, losses = choose_penalty(observed_rows, y)
    prediction = predict(fit(observed_rows, y, alpha), rows_all)
    return prediction, {"alpha": alpha, "observed_loo_mse": loss, "loo_losses": losses}


def greedy_design(rows_all: np.ndarray, chosen: list[int], count: int, candidates: np.ndarray | None = None) -> list[int]:
    """``count`` masks bought one at a time, each the candidate of largest xᵀCx (rounded to 10
    decimals, lowest index on ties), C the inverse of the chosen rows' regularised Gram matrix.
    ``candidates`` (a boolean mask over all masks, default: every mask) narrows the choice; the
    design stops early when none is left. Utilities are never looked at."""
    p = rows_all.shape[1]
    regulariser = np.diag([DESIGN_CONSTANT_RIDGE] + [DESIGN_RIDGE] * (p - 1))
    rows = rows_all[chosen]
    open_ = np.ones(len(rows_all), dtype=bool) if candidates is None else candidates.copy()
    open_[chosen] = False
    bought: list[int] = []
    for _ in range(count):
        if not open_.any():
            break
        inverse = np.linalg.inv(rows.T @ rows + regulariser)
        index = np.flatnonzero(open_)
        x = rows_all[index]
        scores = np.round(np.sum((x @ inverse) * x, axis=1), 10)
        pick = int(index[np.argmax(scores)])
        bought.append(pick)
        open_[pick] = False
        rows = np.vstack([rows, rows_all[pick]])
    return bought
