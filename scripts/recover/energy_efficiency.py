"""Search the value formatting / row order of the UCI energy_efficiency data.csv export.

Run:  nice -n 10 ../../.venv/bin/python energy_efficiency.py
"""

import numpy as np
import openpyxl
from common import SHARED, published_sha, sha256
from concrete import rnd
from tabular import dedup, regression_npz, summary_check


def read_xlsx():
    ws = openpyxl.load_workbook(f"{SHARED}/raw/energy_efficiency/ENB2012_data.xlsx", data_only=True).worksheets[0]
    rows = [r[:10] for r in ws.iter_rows(values_only=True) if any(v is not None for v in r)]
    return np.array(rows[1:], dtype=np.float64)


def main():
    raw = read_xlsx()
    target = published_sha("inputs/energy_efficiency/arrays.npz")
    for tnd in [None, 2, 1]:
        for fnd in [None, 2, 1]:
            for mode in ["half_up", "half_even", "down"]:
                X = np.array([[rnd(float(v), fnd, mode) for v in row] for row in raw[:, :8]])
                y = np.array([rnd(float(v), tnd, mode) for v in raw[:, 8]])
                Xd, yd = dedup(X, y)
                b, arrs = regression_npz(Xd, yd)
                s = summary_check("energy_efficiency", arrs)
                print(f"feat_nd={fnd} targ_nd={tnd} mode={mode} rows={len(Xd)} npz={'MATCH' if sha256(b) == target else 'no'} {s}")


if __name__ == "__main__":
    main()
