"""Try simple orderings of the original training (point -> counter) pairs as the ArguAna cohort and
compare the first 64 query texts' length quantiles with the published ones (383/858.5/1262/1725.25/3402).

Run:  ../../.venv/bin/python arguana_cohort.py [/tmp/wwref_arguana]
"""

import os
import sys
import zipfile

import numpy as np
from arguana_counts import load, norm

PUB_Q = [383.0, 858.5, 1262.0, 1725.25, 3402.0]


def true_pairs(root, split="training", fname="01-debate-opposing-counters.tsv.zip"):
    p = os.path.join(root, "arguana-counterargs-corpus", "03-pairs-best-counter-task", split, fname)
    z = zipfile.ZipFile(p)
    txt = z.read(z.namelist()[0]).decode("utf-8")
    out = []
    for line in txt.splitlines():
        f = line.split("\t")
        if len(f) >= 3 and f[2] == "true":
            out.append((f[0], f[1]))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wwref_arguana"
    items = load(root)
    by_rel = {i["rel"]: i for i in items}
    pairs = true_pairs(root)
    print("true pairs", len(pairs))
    orders = {
        "pairfile": pairs,
        "sorted_path": sorted(pairs),
    }
    for name, ps in orders.items():
        seen = set()
        qs = []
        for a, b in ps:
            t = by_rel[a]["text"]
            k = norm(t)
            if k in seen:
                continue
            seen.add(k)
            qs.append((a, b, t))
        for n in [64]:
            L = np.array([len(t) for _, _, t in qs[:n]])
            print(name, n, np.quantile(L, [0, 0.25, 0.5, 0.75, 1]).tolist(), "pub", PUB_Q)


if __name__ == "__main__":
    main()
