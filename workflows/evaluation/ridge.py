"""Ridge on ±1 coded features (degree 1: main effects; degree 2: main and pair effects) with the
penalty chosen by exact leave-one-out, and the greedy variance design that buys masks for it."""

from __future__ import annotations

import numpy as np

PENALTIES = (1e-5, 1e-3, 0.1, 1.0, 10.0)
#: The design's regularisation: almost none on the constant column, 0.01 on every other.
DESIGN_CONSTANT_RIDGE = 1e-8
DESIGN_RIDGE = 0.01


class Centred:
    """Rows centred on their column means (the constant column left out) and the centred values: what a
    fit needs whatever the penalty, computed once for all penalties."""

    def __init__(self, rows: np.ndarray, y: np.ndarray) -> None:
        columns = rows[:, 1:]
        self.mean_x = columns.mean(axis=0)
        centred = columns - self.mean_x
        self.mean_y = y.mean()
        self.gram = centred.T @ centred
        self.moment = centred.T @ (y - self.mean_y)
        self.identity = np.eye(columns.shape[1])

    def fit(self, alpha: float) -> np.ndarray:
        """The coefficients of every column, the intercept first; the constant column is not penalised."""
        beta = np.linalg.solve(self.gram + alpha * self.identity, self.moment)
        return np.concatenate([[self.mean_y - self.mean_x @ beta], beta])

    def fit_each(self, penalties: tuple[float, ...]) -> list[np.ndarray]:
        """``fit`` for each penalty, the systems solved in one call: NumPy solves a stack one system at a
        time with the same LAPACK routine, so each solution has the bits of ``fit``'s."""
        systems = self.gram + np.multiply.outer(np.array(penalties), self.identity)
        moments = np.broadcast_to(self.moment, (len(penalties), len(self.moment)))[..., None]
        betas = np.linalg.solve(systems, moments)[..., 0]
        return [np.concatenate([[self.mean_y - self.mean_x @ beta], beta]) for beta in betas]


def fit(rows: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    return Centred(rows, y).fit(alpha)


def predict(coefficients: np.ndarray, rows: np.ndarray) -> np.ndarray:
    # one product over all columns, the intercept's included: the published tables' bits
    return rows @ coefficients


def loo_losses(rows: np.ndarray, y: np.ndarray) -> dict[float, float]:
    """Each penalty's mean squared error of predicting each observation from the others (in order)."""
    errors = {alpha: np.empty(len(y)) for alpha in PENALTIES}
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        fold = Centred(rows[keep], y[keep])
        for alpha, coefficients in zip(PENALTIES, fold.fit_each(PENALTIES), strict=True):
            errors[alpha][i] = predict(coefficients, rows[i : i + 1])[0] - y[i]
    return {alpha: float(np.mean(e**2)) for alpha, e in errors.items()}


def choose_penalty(rows: np.ndarray, y: np.ndarray) -> tuple[float, float, dict[str, float]]:
    """(alpha, its loss, every penalty's loss): the least loss rounded to 14 decimals, ties to the larger alpha."""
    if len(y) < 2:
        raise ValueError("ridge needs at least two observations")
    losses = loo_losses(rows, y)
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
