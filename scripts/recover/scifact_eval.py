"""SciFact retrieval evaluation helper (docs/families.md, four-option masks).

Builds, for all 809 BEIR train queries, the per-query NDCG@10 under each of the 16 masks, and the
per-query top-10 lists, so any candidate cohort can be scored without re-running TF-IDF.
Cache: /tmp/wwref_recover_scifact.npz (delete to rebuild).
"""

import csv
import json
import math
import os

import numpy as np
from common import SHARED
from sklearn.feature_extraction.text import TfidfVectorizer

RAW = f"{SHARED}/raw/beir_scifact"
MASKS = [format(i, "04b") for i in range(16)]
CACHE = "/tmp/wwref_recover_scifact.json"


def load_raw():
    corpus = [json.loads(line) for line in open(f"{RAW}/corpus.jsonl", encoding="utf-8")]
    queries = [json.loads(line) for line in open(f"{RAW}/queries.jsonl", encoding="utf-8")]
    qrels = {}
    with open(f"{RAW}/qrels/train.tsv", newline="") as fh:
        r = csv.reader(fh, delimiter="\t")
        next(r)
        for row in r:
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return corpus, queries, qrels


def ndcg10(ranked, gains):
    dcg = math.fsum(gains.get(d, 0) / math.log2(r + 2) for r, d in enumerate(ranked[:10]))
    ideal = sorted(gains.values(), reverse=True)[:10]
    idcg = math.fsum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg


def rank_all(doc_ids, doc_texts, q_texts, mask):
    a, b, c, d = (ch == "1" for ch in mask)
    order = sorted(range(len(doc_ids)), key=lambda i: doc_ids[i])
    ids = [doc_ids[i] for i in order]
    texts = [doc_texts[i] for i in order]
    vec = TfidfVectorizer(
        ngram_range=(1, 2) if a else (1, 1), stop_words="english" if b else None, sublinear_tf=c, use_idf=d, norm="l2", dtype=np.float64
    )
    D = vec.fit_transform(texts)
    Q = vec.transform(q_texts)
    S = (Q @ D.T).toarray()
    out = []
    for row in S:
        idx = np.argsort(-row, kind="stable")[:10]
        out.append([ids[i] for i in idx])
    return out


def build_table(sep=" "):
    if os.path.exists(CACHE) and sep == " ":
        return json.load(open(CACHE))
    corpus, queries, qrels = load_raw()
    qtext = {q["_id"]: q["text"] for q in queries}
    qids = sorted(qrels, key=int)
    doc_ids = [d["_id"] for d in corpus]
    doc_texts = [d["title"] + sep + d["text"] for d in corpus]
    table = {"qids": qids, "qtext": [qtext[q] for q in qids], "ndcg": {}, "top10": {}}
    for m in MASKS:
        ranks = rank_all(doc_ids, doc_texts, table["qtext"], m)
        table["top10"][m] = ranks
        table["ndcg"][m] = [ndcg10(r, qrels[q]) for r, q in zip(ranks, qids, strict=False)]
    if sep == " ":
        json.dump(table, open(CACHE, "w"))
    return table


def cohort_utilities(table, cohort):
    """cohort: list of query ids in cohort order -> {mask: numpy mean of per-query NDCG}."""
    pos = {q: i for i, q in enumerate(table["qids"])}
    return {m: float(np.mean([table["ndcg"][m][pos[q]] for q in cohort])) for m in MASKS}


if __name__ == "__main__":
    t = build_table()
    print(len(t["qids"]), "train queries tabulated")
