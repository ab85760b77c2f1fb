"""Search the value formatting of the UCI concrete data.csv export.

Reads the classic Concrete_Data.xls and applies candidate text-rounding rules to features/target,
then runs the confirmed split recipe and compares with: published arrays.npz sha256, training summary
stats, anchors, and the 16 published records (MAE, prediction sha256).

Run:  nice -n 10 ../../.venv/bin/python concrete.py
"""

import itertools
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

import numpy as np
import xlrd
from common import SHARED, published_sha, sha256
from tabular import dedup, published_records, reg_record, regression_npz, summary_check


def read_xls():
    sh = xlrd.open_workbook(f"{SHARED}/raw/concrete/Concrete_Data.xls").sheet_by_index(0)
    return np.array([sh.row_values(r) for r in range(1, sh.nrows)], dtype=np.float64)


def rnd(v, nd, mode):
    if nd is None:
        return v
    if mode == "py":
        return round(v, nd)
    if mode == "fmt":
        return float(f"{v:.{nd}f}")
    if mode == "g15":  # shortest text with 15 significant digits then round
        v = float(f"{v:.15g}")
        return float(Decimal(repr(v)).quantize(Decimal(1).scaleb(-nd), rounding=ROUND_HALF_UP))
    q = Decimal(1).scaleb(-nd)
    d = Decimal(repr(v))
    return float(d.quantize(q, rounding={"half_up": ROUND_HALF_UP, "half_even": ROUND_HALF_EVEN, "down": ROUND_DOWN}[mode]))


def variants():
    for fnd, tnd in itertools.product([None, 1, 2], [None, 2, 3, 1]):
        for mode in ["py", "fmt", "half_up", "half_even", "down", "g15"]:
            if fnd is None and tnd is None and mode != "py":
                continue
            yield fnd, tnd, mode


def main():
    raw = read_xls()
    target = published_sha("inputs/concrete/arrays.npz")
    pub = published_records("concrete")
    for fnd, tnd, mode in variants():
        X = np.array([[rnd(float(v), fnd, mode) for v in row] for row in raw[:, :8]])
        y = np.array([rnd(float(v), tnd, mode) for v in raw[:, 8]])
        Xd, yd = dedup(X, y)
        if len(Xd) != 1005:
            print(f"feat_nd={fnd} targ_nd={tnd} mode={mode}: rows {len(Xd)}")
            continue
        b, arrs = regression_npz(Xd, yd)
        s = summary_check("concrete", arrs)
        r0 = reg_record(arrs, "0000")
        print(
            f"feat_nd={fnd} targ_nd={tnd} mode={mode}: npz={'MATCH' if sha256(b) == target else 'no'} "
            f"{s} mae0000 diff={r0['native_value'] - float(pub['0000']['native_value']):.3e}"
        )


if __name__ == "__main__":
    main()
