"""Replay the 16 published concrete records (and the energy_efficiency anchors) on the recovered
inputs, inside threadpoolctl limit 1 as the original did.

Run:  OMP_NUM_THREADS=1 nice -n 10 ../../.venv/bin/python check_regression_records.py
"""

import numpy as np
from common import conditions, published_sha, sha256
from concrete import read_xls, rnd
from energy_efficiency import read_xlsx
from tabular import dedup, published_records, reg_record, regression_npz
from threadpoolctl import threadpool_limits


def concrete_arrays():
    raw = read_xls()
    X = np.array([[rnd(float(v), 1, "half_up") for v in r] for r in raw[:, :8]])
    y = np.array([rnd(float(v), 2, "half_up") for v in raw[:, 8]])
    return regression_npz(*dedup(X, y))


def energy_arrays():
    raw = read_xlsx()
    X = raw[:, :8].copy()
    y = np.array([rnd(float(v), 2, "half_up") for v in raw[:, 8]])
    return regression_npz(*dedup(X, y))


if __name__ == "__main__":
    with threadpool_limits(1):
        for name, fn in [("concrete", concrete_arrays), ("energy_efficiency", energy_arrays)]:
            b, arrs = fn()
            print(name, "npz match:", sha256(b) == published_sha(f"inputs/{name}/arrays.npz"))
            for fo in conditions()[name]["free_observations"]:
                r = reg_record(arrs, fo["mask"])
                print(f"  anchor {fo['mask']}: utility equal={r['utility'] == fo['utility']} diff={r['utility'] - fo['utility']:.3e}")
        b, arrs = concrete_arrays()
        for m, rec in published_records("concrete").items():
            r = reg_record(arrs, m)
            print(
                f"  concrete {m}: hash={r['prediction_sha256'] == rec['prediction_sha256']} "
                f"utility={r['utility'] == float(rec['utility'])} diff={r['utility'] - float(rec['utility']):.2e}"
            )
