"""The benchmark's ridge estimators and greedy variance design in plain Python (standard library only),
importable inside the calculation sandbox as ``import wwref_helpers``.

The methods are those of the numerical-controls specification (controls.md): masks coded bit 1 -> +1,
bit 0 -> -1; the feature row of a mask is the constant 1, one column per option, and for degree 2 one
column per pair (i, j), i < j, in lexicographic order; the ridge fit centres the columns and y, leaves
the constant unpenalised and solves (Z'Z + alpha I) beta = Z'(y - mean y) by Gaussian elimination with
partial pivoting (what LAPACK's gesv does); the penalty is chosen from PENALTIES by exact leave-one-out
(losses rounded to 14 decimals, ties to the larger penalty); the design buys, one at a time, the mask of
largest x'Cx (rounded to 10 decimals, lowest index on ties), C the inverse of the chosen rows' Gram
matrix plus diag(1e-8, 0.01, ...). Results agree with the NumPy implementation within about 1e-12
(sums are taken in another order than BLAS takes them), not bit for bit.

Observations are a list in acquisition order of {"mask": "0101", "utility": 0.7} dicts (as the
evidence holds them) or of (mask, utility) pairs; a mask is a string of 0/1 (option A leftmost) or its
index (leftmost option most significant).

    import wwref_helpers as h
    table = h.ridge_pair(evidence["observations"])      # {"predictions": {mask: value}, "alpha": ...}
    masks = h.greedy_design(6, 2, ["000000", "111111"], 10)
"""

from __future__ import annotations

PENALTIES = (1e-5, 1e-3, 0.1, 1.0, 10.0)
DESIGN_CONSTANT_RIDGE = 1e-8
DESIGN_RIDGE = 0.01
_TINY = 2.2250738585072014e-308  # the smallest normal double: below it LAPACK divides instead of scaling
_TIE = 1e-9  # relative agreement of two design scores taken as a tie (see greedy_design)


class SingularMatrixError(ValueError):
    """The linear system has no unique solution (a zero pivot)."""


# ---- masks and feature rows -------------------------------------------------------------------------


def mask_index(mask: str | int) -> int:
    """The index of a mask: its 0/1 string read as a binary number, leftmost option most significant."""
    if isinstance(mask, int):
        return mask
    if not mask or any(c not in "01" for c in mask):
        raise ValueError(f"a mask is a string of 0 and 1, not {mask!r}")
    return int(mask, 2)


def mask_string(index: int, width: int) -> str:
    return format(index, f"0{width}b")


def feature_row(mask: str | int, width: int, degree: int) -> list[float]:
    """The constant 1, each option coded +-1 (option A first), then for degree 2 each pair's product."""
    if degree not in (1, 2):
        raise ValueError(f"degree is 1 (main effects) or 2 (pair effects), not {degree!r}")
    index = mask_index(mask)
    coded = [1.0 if (index >> (width - 1 - k)) & 1 else -1.0 for k in range(width)]
    row = [1.0, *coded]
    if degree == 2:
        row += [coded[i] * coded[j] for i in range(width) for j in range(i + 1, width)]
    return row


def feature_rows(width: int, degree: int) -> list[list[float]]:
    """Every mask's feature row, index 0 to 2^width - 1."""
    return [feature_row(k, width, degree) for k in range(2**width)]


# ---- linear algebra ---------------------------------------------------------------------------------


def _pairwise_sum(values: list[float]) -> float:
    """NumPy's summation of a contiguous float64 array (eight running sums, then pairs), so that means
    come out as NumPy's do."""
    n = len(values)
    if n < 8:
        total = 0.0
        for v in values:
            total += v
        return total
    if n <= 128:
        r = list(values[:8])
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += values[i + j]
            i += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            total += values[i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _pairwise_sum(values[:half]) + _pairwise_sum(values[half:])


def _mean(values: list[float]) -> float:
    return _pairwise_sum(values) / len(values)


def lu_factor(a: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    """LU factorisation with partial pivoting (row of the largest magnitude, the first on ties), as
    LAPACK's getf2: returns the packed factors and the row permutation."""
    n = len(a)
    lu = [list(map(float, row)) for row in a]
    if any(len(row) != n for row in lu):
        raise ValueError("the matrix must be square")
    perm = list(range(n))
    for j in range(n):
        p = max(range(j, n), key=lambda i: (abs(lu[i][j]), -i))
        if lu[p][j] == 0.0:
            raise SingularMatrixError("singular matrix")
        if p != j:
            lu[p], lu[j] = lu[j], lu[p]
            perm[p], perm[j] = perm[j], perm[p]
        pivot = lu[j][j]
        if abs(pivot) >= _TINY:
            reciprocal = 1.0 / pivot
            for i in range(j + 1, n):
                lu[i][j] *= reciprocal
        else:
            for i in range(j + 1, n):
                lu[i][j] /= pivot
        for i in range(j + 1, n):
            factor = lu[i][j]
            if factor != 0.0:
                row, pivot_row = lu[i], lu[j]
                for k in range(j + 1, n):
                    row[k] -= factor * pivot_row[k]
    return lu, perm


def lu_solve(lu: list[list[float]], perm: list[int], b: list[float]) -> list[float]:
    n = len(lu)
    x = [float(b[perm[i]]) for i in range(n)]
    for i in range(n):  # L (unit diagonal)
        row = lu[i]
        for k in range(i):
            x[i] -= row[k] * x[k]
    for i in range(n - 1, -1, -1):  # U
        row = lu[i]
        for k in range(i + 1, n):
            x[i] -= row[k] * x[k]
        x[i] /= row[i]
    return x


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b (Gaussian elimination with partial pivoting)."""
    lu, perm = lu_factor(a)
    if len(b) != len(lu):
        raise ValueError("the right-hand side does not match the matrix")
    return lu_solve(lu, perm, b)


def inverse(a: list[list[float]]) -> list[list[float]]:
    """The explicit inverse (the identity's columns solved for, as numpy.linalg.inv)."""
    lu, perm = lu_factor(a)
    n = len(lu)
    columns = [lu_solve(lu, perm, [1.0 if i == j else 0.0 for i in range(n)]) for j in range(n)]
    return [[columns[j][i] for j in range(n)] for i in range(n)]


# ---- ridge ------------------------------------------------------------------------------------------


def ridge_fit(rows: list[list[float]], y: list[float], alpha: float) -> list[float]:
    """Coefficients (the intercept first) of the ridge fit at penalty alpha on centred columns."""
    n = len(rows)
    if n == 0 or n != len(y):
        raise ValueError("ridge needs as many rows as values, at least one")
    p = len(rows[0]) - 1
    mean_x = [_mean([row[1 + j] for row in rows]) for j in range(p)]
    z = [[row[1 + j] - mean_x[j] for j in range(p)] for row in rows]
    mean_y = _mean(list(y))
    centred_y = [v - mean_y for v in y]
    gram = [[0.0] * p for _ in range(p)]
    right = [0.0] * p
    for j in range(p):
        for k in range(p):
            total = 0.0
            for r in z:
                total += r[j] * r[k]
            gram[j][k] = total + (alpha if j == k else 0.0)
        total = 0.0
        for r, v in zip(z, centred_y, strict=True):
            total += r[j] * v
        right[j] = total
    beta = solve(gram, right)
    intercept = mean_y
    for j in range(p):
        intercept -= mean_x[j] * beta[j]
    return [intercept, *beta]


def ridge_predict(coefficients: list[float], rows: list[list[float]]) -> list[float]:
    """One product over all columns, the intercept's included."""
    out = []
    for row in rows:
        total = 0.0
        for c, x in zip(coefficients, row, strict=True):
            total += c * x
        out.append(total)
    return out


def loo_loss(rows: list[list[float]], y: list[float], alpha: float) -> float:
    """Mean squared error of predicting each observation from all the others (kept in order)."""
    squares = []
    for i in range(len(y)):
        keep_rows = rows[:i] + rows[i + 1 :]
        keep_y = list(y[:i]) + list(y[i + 1 :])
        error = ridge_predict(ridge_fit(keep_rows, keep_y, alpha), [rows[i]])[0] - y[i]
        squares.append(error * error)
    return _mean(squares)


def choose_penalty(rows: list[list[float]], y: list[float]) -> tuple[float, float, dict[str, float]]:
    """(alpha, its loss, every penalty's loss): the least loss rounded to 14 decimals, ties to the larger alpha."""
    if len(y) < 2:
        raise ValueError("ridge needs at least two observations")
    losses = {alpha: loo_loss(rows, y, alpha) for alpha in PENALTIES}
    alpha = min(PENALTIES, key=lambda a: (round(losses[a], 14), -a))
    return alpha, losses[alpha], {repr(a): loss for a, loss in losses.items()}


def _observations(observations) -> tuple[list[int], list[float], int]:
    """(indices, utilities, width) of observations given as dicts or pairs, in their order."""
    indices, values, width = [], [], None
    for item in observations:
        mask, utility = (item["mask"], item["utility"]) if isinstance(item, dict) else item
        if isinstance(mask, str):
            if width is not None and len(mask) != width:
                raise ValueError(f"mask {mask!r} is not {width} options wide like the others")
            width = len(mask)
        indices.append(mask_index(mask))
        values.append(float(utility))
    if width is None:
        raise ValueError("give at least one mask as a 0/1 string (or pass width=)")
    return indices, values, width


def ridge_table(observations, degree: int, width: int | None = None) -> dict:
    """The estimator's complete table: every mask predicted by the ridge of ``degree`` with the penalty
    chosen by leave-one-out, clipped to [0, 1], observed masks taking their observed utilities.
    Returns {"predictions": {mask: value} (all masks, ascending index), "degree", "alpha",
    "observed_loo_mse", "loo_losses"}."""
    if width is None:
        indices, values, width = _observations(observations)
    else:
        indices = [mask_index(m["mask"] if isinstance(m, dict) else m[0]) for m in observations]
        values = [float(m["utility"] if isinstance(m, dict) else m[1]) for m in observations]
    rows_all = feature_rows(width, degree)
    observed = [rows_all[k] for k in indices]
    alpha, loss, losses = choose_penalty(observed, values)
    predicted = ridge_predict(ridge_fit(observed, values, alpha), rows_all)
    table = [min(1.0, max(0.0, v)) for v in predicted]
    for k, v in zip(indices, values, strict=True):
        table[k] = v
    return {
        "predictions": {mask_string(k, width): v for k, v in enumerate(table)},
        "degree": degree,
        "alpha": alpha,
        "observed_loo_mse": loss,
        "loo_losses": losses,
    }


def ridge_main(observations, width: int | None = None) -> dict:
    """The main-effect ("degree 1") ridge table; see ridge_table."""
    return ridge_table(observations, 1, width)


def ridge_pair(observations, width: int | None = None) -> dict:
    """The pair-effect ("degree 2") ridge table; see ridge_table."""
    return ridge_table(observations, 2, width)


# ---- greedy variance design -------------------------------------------------------------------------


def _round_like_numpy(value: float, decimals: int) -> float:
    # numpy.round scales, rounds half to even, and scales back (Python's round(x, n) rounds the decimal
    # expansion instead): the design's ties are decided as the NumPy implementation decides them
    scale = 10.0**decimals
    return round(value * scale) / scale


def greedy_design(width: int, degree: int, chosen, count: int, candidates=None) -> list[str]:
    """``count`` masks bought one at a time after ``chosen`` (masks in observation order), each the
    candidate of largest x'Cx (rounded to 10 decimals, the lowest index on ties). ``candidates``
    (masks; default every mask) narrows the choice; the design stops early when none is left. It never
    looks at utilities. Returns mask strings in the order bought."""
    rows_all = feature_rows(width, degree)
    p = len(rows_all[0])
    rows = [rows_all[mask_index(m)] for m in chosen]
    allowed = set(range(2**width)) if candidates is None else {mask_index(m) for m in candidates}
    open_ = sorted(allowed - {mask_index(m) for m in chosen})
    bought: list[int] = []
    for _ in range(count):
        if not open_:
            break
        gram = [[0.0] * p for _ in range(p)]
        for j in range(p):
            for k in range(p):
                total = 0.0
                for r in rows:
                    total += r[j] * r[k]
                gram[j][k] = total
        gram[0][0] += DESIGN_CONSTANT_RIDGE
        for j in range(1, p):
            gram[j][j] += DESIGN_RIDGE
        c = inverse(gram)
        scores = []
        for index in open_:
            x = rows_all[index]
            score = 0.0
            for k in range(p):
                t = 0.0
                for j in range(p):
                    t += x[j] * c[j][k]
                score += t * x[k]
            scores.append(_round_like_numpy(score, 10))
        top = max(scores)
        # Scores equal in exact arithmetic (symmetric masks) differ here by rounding noise, which for
        # degree 2 (scores of 1e3 and more) is larger than the 10-decimal rounding: agreement to 1e-9
        # relative counts as a tie, and the lowest index wins, as the specification's rule intends.
        near = _TIE * max(1.0, abs(top))
        best = next(index for index, score in zip(open_, scores, strict=True) if score >= top - near)
        bought.append(best)
        open_.remove(best)
        rows.append(rows_all[best])
    return [mask_string(k, width) for k in bought]
