"""Recipes ``beir_retrieval`` (scifact) and ``arguana_retrieval`` -> retrieval input (spec/preparation.md 4).

The npz is empty; the metadata holds ``documents`` [{doc_id, text}] in corpus file order, ``queries``
[[query_id, text]] in cohort order, ``qrels`` {query_id: {doc_id: gain}} for the cohort (cohort order,
then qrels file order) and ``exclude_self``.

beir_retrieval: document text = title + ``title_separator`` + text (BEIR corpus.jsonl). The cohort is
drawn from the queries of one qrels file: those query ids are ranked by the hex digest (``cohort.hash``)
of ``cohort.key`` with "{query_id}" / "{text}" substituted (ties by query id), and the first
``cohort.size`` are kept, in that order. The published cohort ("hash-first 64 original train queries")
is not yet reproduced, so the key is a parameter. Facts ``cohort_ids_sha256`` = canonical digest
(workflows.hashing.digest) of the cohort's query id list in order (our own identity; the pre-image of
the published query_ids_sha256 is unknown).

arguana_retrieval: the published catalog built 8567 documents and 64 "prepared G queries" from the
original-author corpus; that construction is not published, so this recipe validates its parameters
and then fails with an explanation (it never guesses a corpus).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pandas as pd

from workflows.container import write_prepared
from workflows.hashing import digest
from workflows.prepare._params import Params

QUANTILES = [0.0, 0.25, 0.5, 0.75, 1.0]


def _jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _quantiles(lengths: list[int]) -> list[float]:
    return [float(q) for q in np.quantile(np.asarray(lengths, dtype=np.float64), QUANTILES)]


def run_beir(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    corpus_path = p.raw_file("corpus", raw)
    queries_path = p.raw_file("queries", raw)
    qrels_path = p.raw_file("qrels", raw)
    separator = p.str("title_separator")
    cohort = p.obj("cohort")
    size = cohort.int("size", minimum=1)
    hash_name = cohort.str("hash", choices=sorted(hashlib.algorithms_guaranteed - {"shake_128", "shake_256"}))
    key = cohort.str("key")
    cohort.close()
    exclude_self = p.bool("exclude_self")
    p.close()
    if "{query_id}" not in key and "{text}" not in key:
        raise p.error("params.cohort.key", "expected a template holding {query_id} and/or {text}")

    corpus = _jsonl(corpus_path)
    documents = [{"doc_id": str(d["_id"]), "text": f"{d['title']}{separator}{d['text']}"} for d in corpus]
    if len({d["doc_id"] for d in documents}) != len(documents):
        raise ValueError(f"beir_retrieval: {corpus_path} repeats document ids")
    query_text = {str(q["_id"]): q["text"] for q in _jsonl(queries_path)}
    table = pd.read_csv(qrels_path, sep="\t", dtype=str, keep_default_na=False)
    table.columns = [c.strip() for c in table.columns]
    qrels: dict[str, dict[str, int]] = {}
    for qid, did, score in table[["query-id", "corpus-id", "score"]].itertuples(index=False):
        qrels.setdefault(qid.strip(), {})[did.strip()] = int(score)
    unknown = sorted(set(qrels) - set(query_text))
    if unknown:
        raise ValueError(f"beir_retrieval: qrels name {len(unknown)} query id(s) not in {queries_path}, e.g. {unknown[0]}")
    if size > len(qrels):
        raise p.error("params.cohort.size", f"only {len(qrels)} queries have qrels")

    def rank_key(qid: str) -> tuple[str, str]:
        text = key.replace("{query_id}", qid).replace("{text}", query_text[qid])
        return hashlib.new(hash_name, text.encode("utf-8")).hexdigest(), qid

    chosen = sorted(qrels, key=rank_key)[:size]
    metadata = {
        "documents": documents,
        "queries": [[qid, query_text[qid]] for qid in chosen],
        "qrels": {qid: qrels[qid] for qid in chosen},
        "exclude_self": exclude_self,
    }
    write_prepared(out, [], metadata)
    return {
        "corpus_rows": len(documents),
        "evaluation_rows": len(chosen),
        "candidate_queries": len(qrels),
        "cohort_ids_sha256": digest(chosen),
        "relevant_pairs": sum(len(qrels[q]) for q in chosen),
        "document_length_quantiles": _quantiles([len(d["text"]) for d in documents]),
        "query_length_quantiles": _quantiles([len(query_text[q]) for q in chosen]),
        "exclude_self": exclude_self,
    }


def run_arguana(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    archive = p.raw_file("archive", raw)
    p.str("split", choices=("training", "validation", "test"))
    p.int("queries", minimum=1)
    p.bool("exclude_self")
    p.close()
    raise ValueError(
        "arguana_retrieval: the published ArguAna input (8567 documents, 64 'prepared G queries' of the "
        "original training split) was built by an unpublished procedure from the original-author corpus, "
        f"and {archive} lacks five large training pair files (theme-level 05/06); no documented recipe "
        "reproduces it, so this source cannot be prepared (see shared/spec/preparation.md section 4)."
    )
