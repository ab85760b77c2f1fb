"""Search the npz container layout (key order, dtypes) of the four graph sources.

Split procedure = docs/recipes.md. This script rebuilds the arrays
and tries key orders x dtypes until the sha256 of the savez_compressed bytes equals the published one.

Run:  .venv/bin/python scripts/recover/graphs.py [--write-dir DIR]
"""

import itertools
import re
import sys

import numpy as np
from common import SHARED, npz_bytes, published_sha, sha256

GRAPHS = {  # name -> split seed (published)
    "lesmis": 369610197,
    "adjnoun": 445279631,
    "football": 1356401253,
    "dolphins": 3335237670,
}


def read_gml(path):
    """Minimal tolerant GML reader: node ids in file order, edges (source,target) in file order."""
    txt = open(path, encoding="utf-8", errors="replace").read()
    nodes = []
    edges = []
    for m in re.finditer(r"\b(node|edge)\s*\[(.*?)\]", txt, re.S):
        kind, body = m.group(1), m.group(2)
        if kind == "node":
            nodes.append(int(re.search(r"\bid\s+(-?\d+)", body).group(1)))
        else:
            s = int(re.search(r"\bsource\s+(-?\d+)", body).group(1))
            t = int(re.search(r"\btarget\s+(-?\d+)", body).group(1))
            edges.append((s, t))
    return nodes, edges


def build(name, seed):
    nodes, raw_edges = read_gml(f"{SHARED}/raw/graph_{name}/{name}.gml")
    idx = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    es = set()
    for s, t in raw_edges:
        a, b = idx[s], idx[t]
        if a == b:
            continue
        es.add((min(a, b), max(a, b)))
    E = sorted(es)
    g = np.random.default_rng(seed)
    shuffled = [E[i] for i in g.permutation(len(E))]
    m = round(0.2 * len(E))
    obs = shuffled[: len(E) - 2 * m]
    cal = shuffled[len(E) - 2 * m : len(E) - m]
    tst = shuffled[len(E) - m :]
    non = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in es]
    p = g.permutation(len(non))
    cneg = [non[k] for k in p[:m]]
    tneg = [non[k] for k in p[m : 2 * m]]
    return dict(
        n_nodes=n,
        observed_edges=obs,
        fit_pairs=cal + cneg,
        fit_labels=[1] * m + [0] * m,
        test_pairs=tst + tneg,
        test_labels=[1] * m + [0] * m,
    )


KEYS = ["n_nodes", "observed_edges", "fit_pairs", "fit_labels", "test_pairs", "test_labels"]
INT_DT = [np.int64, np.int32, np.int16, np.uint8, np.intp, np.uint32, np.uint64]
LAB_DT = [np.int64, np.int32, np.int8, np.uint8, np.float64, np.bool_]


def search(name, seed, write_dir=None):
    target = published_sha(f"inputs/graph_{name}/arrays.npz")
    d = build(name, seed)
    # stage 1: canonical order, a few dtype combos; stage 2: all key orders with those combos
    combos = []
    for nd in [np.int64, np.int32, "pyint"]:
        for ed in [np.int64, np.int32]:
            for ld in [np.int64, np.int32, np.float64, np.uint8, np.int8, np.bool_]:
                combos.append((nd, ed, ld))
    for nd in INT_DT:
        for ed in INT_DT:
            for ld in LAB_DT:
                combos.append((nd, ed, ld))
    orders = [KEYS] + [list(p) for p in itertools.permutations(KEYS) if list(p) != KEYS]
    tried = 0
    for order in orders:
        for nd, ed, ld in combos:
            arrs = {
                "n_nodes": np.array(d["n_nodes"]) if nd == "pyint" else np.array(d["n_nodes"], dtype=nd),
                "observed_edges": np.array(d["observed_edges"], dtype=ed).reshape(-1, 2),
                "fit_pairs": np.array(d["fit_pairs"], dtype=ed).reshape(-1, 2),
                "test_pairs": np.array(d["test_pairs"], dtype=ed).reshape(-1, 2),
                "fit_labels": np.array(d["fit_labels"], dtype=ld),
                "test_labels": np.array(d["test_labels"], dtype=ld),
            }
            b = npz_bytes([(k, arrs[k]) for k in order])
            tried += 1
            if sha256(b) == target:
                print(f"{name}: MATCH order={order} n_nodes={nd} edges/pairs={ed} labels={ld} (after {tried})")
                if write_dir:
                    open(f"{write_dir}/graph_{name}.npz", "wb").write(b)
                return order, (nd, ed, ld)
    print(f"{name}: no match in {tried} candidates")
    return None


if __name__ == "__main__":
    wd = sys.argv[sys.argv.index("--write-dir") + 1] if "--write-dir" in sys.argv else None
    for name, seed in GRAPHS.items():
        search(name, seed, wd)
