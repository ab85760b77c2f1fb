"""Recipes ``beir_retrieval`` (scifact) and ``arguana_retrieval`` -> retrieval input (docs/recipes.md).

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

arguana_retrieval: our own documented recipe on the original-author corpus (the published
construction of its 64 "prepared G queries" is not published; scripts/recover/README.md). Documents
= every point and counter text of 02-extracted-arguments (all splits), exact UTF-8 text, de-duplicated
by exact text; doc_id = the relative path (without .txt) of a text's first occurrence in sorted path
order. This reproduces the published corpus size (8567) and all five document length quantiles.
Queries = the true (point, counter) pairs of the debate-level pair file of ``split``, in file order,
skipping a point whose normalised text repeats an earlier query; the first ``queries`` are kept; qrels
= {point doc_id: {counter doc_id: 1}}. The cohort is not the published one (not comparable).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import unicodedata
import zipfile
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
    separator = p.get("title_separator")
    cohort = p.get("cohort")
    size = cohort.get("size")
    hash_name = cohort.get("hash")
    key = cohort.get("key")
    exclude_self = p.get("exclude_self")

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


ARGUMENTS = "02-extracted-arguments/"
PAIRS = "03-pairs-best-counter-task/{split}/01-debate-opposing-counters.tsv.zip"


def _normalised(text: str) -> str:
    """NFKC, casefold, whitespace collapsed: the self-exclusion key of docs/families.md"""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def run_arguana(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    archive = p.raw_file("archive", raw)
    split = p.get("split")
    size = p.get("queries")
    exclude_self = p.get("exclude_self")

    texts: dict[str, str] = {}  # relative path (without .txt) -> exact text
    pair_bytes = None
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if name.startswith(ARGUMENTS) and name.endswith(("-point.txt", "-counter.txt")):
                rel = name[len(ARGUMENTS) :]
                texts[rel[: -len(".txt")]] = tar.extractfile(member).read().decode("utf-8")
            elif name == PAIRS.format(split=split):
                pair_bytes = tar.extractfile(member).read()
    if not texts:
        raise ValueError(f"arguana_retrieval: {archive} holds no {ARGUMENTS} point/counter texts")
    if pair_bytes is None:
        raise ValueError(f"arguana_retrieval: {archive} lacks {PAIRS.format(split=split)}")

    doc_of_text: dict[str, str] = {}
    for rel in sorted(texts):
        doc_of_text.setdefault(texts[rel], rel)
    documents = sorted(({"doc_id": doc_id, "text": text} for text, doc_id in doc_of_text.items()), key=lambda d: d["doc_id"])

    with zipfile.ZipFile(io.BytesIO(pair_bytes)) as pairs_zip:
        lines = pairs_zip.read(pairs_zip.namelist()[0]).decode("utf-8").splitlines()
    queries: list[list[str]] = []
    qrels: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for line in lines:
        fields = line.split("\t")
        if len(fields) < 3 or fields[2] != "true":
            continue
        point, counter = (f[: -len(".txt")] for f in fields[:2])
        if point not in texts or counter not in texts:
            raise ValueError(f"arguana_retrieval: pair names a text missing from the archive: {point} / {counter}")
        key = _normalised(texts[point])
        if key in seen:
            continue
        seen.add(key)
        query_id = doc_of_text[texts[point]]
        queries.append([query_id, texts[point]])
        qrels[query_id] = {doc_of_text[texts[counter]]: 1}
        if len(queries) == size:
            break
    if len(queries) < size:
        raise p.error("params.queries", f"only {len(queries)} distinct true pairs in the {split} pair file")

    metadata = {"documents": documents, "queries": queries, "qrels": qrels, "exclude_self": exclude_self}
    write_prepared(out, [], metadata)
    return {
        "corpus_documents": len(documents),
        "evaluation_queries": len(queries),
        "argument_files": len(texts),
        "cohort_ids_sha256": digest([q[0] for q in queries]),
        "relevant_pairs": len(queries),
        "document_length_quantiles": _quantiles([len(d["text"]) for d in documents]),
        "query_length_quantiles": _quantiles([len(q[1]) for q in queries]),
        "exclude_self": exclude_self,
    }
