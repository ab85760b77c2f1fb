"""An independent recomputation of one comparison cell, for test/evaluation/compare.test.ts: reads two
methods' runs (a cohort's results.jsonl, or one method of a controls records.jsonl: FILE:METHOD),
keeps the rows of one track and budget on the given conditions, and
computes each cohort's family-macro effect recovery (mean over repeats within a source, over sources
within a family, over families) and the 95 % source-bootstrap percentile intervals of each and of
their difference, drawing the sources with the seeded generator the comparison documents
(mulberry32), the same draws for both. Prints the numbers as JSON.

    python compare_interval.py A B TRACK BUDGET RESAMPLES SEED CONDITION,CONDITION…
"""

from __future__ import annotations

import json
import math
import sys

MASK = 0xFFFFFFFF


def mulberry32(seed: int):
    state = seed & MASK

    def draw() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & MASK
        t = state
        t = ((t ^ (t >> 15)) * (t | 1)) & MASK
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & MASK)) & MASK
        return ((t ^ (t >> 14)) & MASK) / 4294967296

    return draw


def rows_of(spec: str, track: str, budget: int, conditions: set[str]) -> list[dict]:
    path, _, method = spec.partition(":")
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    rows = [r for r in rows if r["track"] == track and r["budget"] == budget and r["condition"] in conditions]
    if method:
        rows = [r for r in rows if r["method"] == method]
    # a results line carries its recovery at the top; a control record in its score
    return [{**r, "recovery": r["effect_recovery"] if "effect_recovery" in r else r["score"]["effect_recovery"]} for r in rows]


def source_means(rows: list[dict]) -> dict[str, tuple[str, float]]:
    by_source: dict[str, list[dict]] = {}
    for r in rows:
        by_source.setdefault(r["instance"], []).append(r)
    return {s: (rs[0]["family"], sum(r["recovery"] for r in rs) / len(rs)) for s, rs in by_source.items()}


def macro(means: dict[str, tuple[str, float]], draw: list[str]) -> float:
    families: dict[str, list[float]] = {}
    for source in draw:
        family, value = means[source]
        families.setdefault(family, []).append(value)
    values = [sum(v) / len(v) for v in families.values()]
    return sum(values) / len(values)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def main() -> None:
    spec_a, spec_b, track, budget, resamples, seed, conditions = sys.argv[1:8]
    shared = set(conditions.split(","))
    a, b = rows_of(spec_a, track, int(budget), shared), rows_of(spec_b, track, int(budget), shared)
    means_a, means_b = source_means(a), source_means(b)
    sources = sorted({r["instance"] for r in a + b})
    random = mulberry32(int(seed))
    values: dict[str, list[float]] = {"a": [], "b": [], "difference": []}
    for _ in range(int(resamples)):
        draw = [sources[math.floor(random() * len(sources))] for _ in sources]
        va, vb = macro(means_a, draw), macro(means_b, draw)
        values["a"].append(va)
        values["b"].append(vb)
        values["difference"].append(va - vb)
    print(json.dumps({k: [percentile(v, 0.025), percentile(v, 0.975)] for k, v in values.items()}))


if __name__ == "__main__":
    main()
