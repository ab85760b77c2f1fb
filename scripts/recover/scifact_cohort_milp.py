"""Recover the SciFact 64-query cohort as a SET from the 16 published utilities (subset-sum MILP).

Per-query NDCG@10 is independent of the other queries, so the published mean utility of mask m is
(1/64) * sum over the cohort of ndcg_m(q). We solve for a 0/1 selection of the 809 train queries with
sum 64 and all 16 mask sums equal to 64*utility (tolerance tol), plus min/max query length 38/173
(published query length quantiles). Uses scipy.optimize.milp (HiGHS).

Run:  nice -n 10 ../../.venv/bin/python scifact_cohort_milp.py
"""

import csv
import json

import numpy as np
from common import SHARED
from scifact_eval import MASKS, build_table
from scipy.optimize import Bounds, LinearConstraint, milp


def published_utilities():
    with open(f"{SHARED}/published/references/scifact.csv") as fh:
        return {r["mask"]: float(r["utility"]) for r in csv.DictReader(fh)}


def solve(table, tol=1e-9, exclude_sets=()):
    pub = published_utilities()
    n = len(table["qids"])
    lens = np.array([len(t) for t in table["qtext"]])
    A = [np.ones(n)]
    lo = [64]
    hi = [64]
    for m in MASKS:
        A.append(np.array(table["ndcg"][m]))
        lo.append(64 * pub[m] - tol)
        hi.append(64 * pub[m] + tol)
    # at least one query of length 38 and one of length 173
    A.append((lens == 38).astype(float))
    lo.append(1)
    hi.append(64)
    A.append((lens == 173).astype(float))
    lo.append(1)
    hi.append(64)
    for s in exclude_sets:  # no-good cuts
        v = np.zeros(n)
        v[list(s)] = 1
        A.append(v)
        lo.append(0)
        hi.append(63)
    ub = ((lens >= 38) & (lens <= 173)).astype(float)
    res = milp(
        c=np.zeros(n),
        constraints=LinearConstraint(np.array(A), lo, hi),
        integrality=np.ones(n),
        bounds=Bounds(np.zeros(n), ub),
        options={"time_limit": 600, "disp": False},
    )
    if res.x is None:
        return None, res
    sel = [i for i in range(n) if res.x[i] > 0.5]
    return sel, res


if __name__ == "__main__":
    t = build_table()
    sel, res = solve(t)
    print(res.status, res.message)
    if sel:
        ids = [t["qids"][i] for i in sel]
        print(len(ids), ids)
        json.dump(ids, open("/tmp/wwref_recover_scifact_cohort_set.json", "w"))
