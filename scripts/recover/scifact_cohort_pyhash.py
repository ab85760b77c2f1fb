"""Fourth round: Python built-in hash() orderings (PYTHONHASHSEED=0..3 in a subprocess) and plain
id/text orderings of the 809 train queries, scored with the set oracle.

Run:  nice -n 10 ../../.venv/bin/python scifact_cohort_pyhash.py
"""

import json
import os
import subprocess
import sys

import numpy as np
from scifact_cohort_milp import published_utilities
from scifact_eval import build_table

CHILD = "import json,sys; d=json.load(sys.stdin); print(json.dumps([hash(x) for x in d]))"


def main():
    t = build_table()
    pub = published_utilities()
    qids, qtext = t["qids"], t["qtext"]
    nd0 = np.array(t["ndcg"]["0000"])
    cands = {
        "int_asc": sorted(range(len(qids)), key=lambda i: int(qids[i])),
        "str_asc": sorted(range(len(qids)), key=lambda i: qids[i]),
        "text_asc": sorted(range(len(qids)), key=lambda i: qtext[i]),
        "len_asc": sorted(range(len(qids)), key=lambda i: (len(qtext[i]), qids[i])),
    }
    for seed in ["0", "1", "2", "3", "42", "20260907"]:
        env = dict(os.environ, PYTHONHASHSEED=seed)
        for label, data in [("id", qids), ("text", qtext)]:
            out = subprocess.run(
                [sys.executable, "-c", CHILD], input=json.dumps(data), capture_output=True, text=True, env=env, check=True
            ).stdout
            h = json.loads(out)
            cands[f"pyhash({label}) seed={seed}"] = sorted(range(len(qids)), key=lambda i: h[i])
            cands[f"pyhash({label})%2^32 seed={seed}"] = sorted(range(len(qids)), key=lambda i: h[i] % 2**32)
    for name, order in cands.items():
        for rev in (False, True):
            sel = (order[::-1] if rev else order)[:64]
            d = nd0[sel].mean() - pub["0000"]
            print(f"{name} rev={rev}: diff0000={d:.3e}{'  HIT' if abs(d) < 1e-9 else ''}")


if __name__ == "__main__":
    main()
