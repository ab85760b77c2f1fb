"""Retrieval (docs/families.md): TF-IDF over the doc_id-sorted corpus, queries ranked by
sparse dot products, top 10 per query, scored by mean NDCG@10.

Two execution paths give the same bits:
* the default, cold path (``predict(data, mask)``) builds one sklearn TfidfVectorizer per mask, exactly
  as the original did;
* the warm path (``predict(data, mask, cache=RetrievalCache(data))``) reuses the expensive stage —
  tokenising the corpus and the queries into term-count matrices — across masks. Counts depend only
  on the n-gram range (A) and the stop-word list (B); binary counts (E) are the same matrices with
  every stored value set to 1, and the weighting (C, D, F) is a TfidfTransformer applied to the
  counts. That is precisely how TfidfVectorizer is composed internally (CountVectorizer with dtype
  float64, then TfidfTransformer fit on the corpus counts), so the floats are identical; the
  equivalence is checked by test/shared-stage.test.ts, not assumed.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer, TfidfVectorizer

from workflows.families._common import options, result

TOP_K = 10


def normalise_text(text: str) -> str:
    """NFKC, casefold, whitespace collapsed to single spaces (self-match exclusion)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class Corpus:
    """The mask-independent view of a retrieval input: documents sorted by doc_id (Python string
    order, stable), queries in cohort order, and (if exclude_self) each query's self-matches."""

    def __init__(self, data: dict) -> None:
        documents = sorted(data["documents"], key=lambda d: d["doc_id"])
        self.doc_ids = [d["doc_id"] for d in documents]
        self.doc_texts = [d["text"] for d in documents]
        self.query_ids = [q[0] for q in data["queries"]]
        self.query_texts = [q[1] for q in data["queries"]]
        self.excluded: list[set[int]] = [set() for _ in self.query_ids]
        if bool(data["exclude_self"]):
            by_text: dict[str, list[int]] = {}
            for index, text in enumerate(self.doc_texts):
                by_text.setdefault(normalise_text(text), []).append(index)
            self.excluded = [set(by_text.get(normalise_text(t), ())) for t in self.query_texts]


class RetrievalCache:
    """Reusable stage for one prepared input (see module docstring). Not used on the default path."""

    def __init__(self, data: dict) -> None:
        self.data = data
        self.corpus = Corpus(data)
        self._counts: dict[tuple[bool, bool], tuple[sp.csr_matrix, sp.csr_matrix]] = {}

    def counts(self, bigrams: bool, stop_words: bool, binary: bool) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """Fresh copies of the (documents, queries) float64 term-count matrices."""
        key = (bigrams, stop_words)
        if key not in self._counts:
            vectorizer = CountVectorizer(
                ngram_range=(1, 2) if bigrams else (1, 1), stop_words="english" if stop_words else None, dtype=np.float64
            )
            doc_counts = vectorizer.fit_transform(self.corpus.doc_texts)
            query_counts = vectorizer.transform(self.corpus.query_texts)
            self._counts[key] = (doc_counts, query_counts)
        doc_counts, query_counts = (m.copy() for m in self._counts[key])
        if binary:  # what CountVectorizer(binary=True) does after counting
            doc_counts.data.fill(1)
            query_counts.data.fill(1)
        return doc_counts, query_counts


def _vectorizer_kwargs(opts: dict[str, bool]) -> dict[str, Any]:
    return {
        "ngram_range": (1, 2) if opts["A"] else (1, 1),
        "stop_words": "english" if opts["B"] else None,
        "sublinear_tf": opts["C"],
        "use_idf": opts["D"],
        "norm": None if opts["F"] else "l2",
        "binary": opts["E"],
        "dtype": np.float64,
    }


def _matrices_cold(corpus: Corpus, opts: dict[str, bool]):
    vectorizer = TfidfVectorizer(**_vectorizer_kwargs(opts))
    doc_matrix = vectorizer.fit_transform(corpus.doc_texts)
    query_matrix = vectorizer.transform(corpus.query_texts)
    return doc_matrix, query_matrix


def _matrices_warm(cache: RetrievalCache, opts: dict[str, bool]):
    doc_counts, query_counts = cache.counts(opts["A"], opts["B"], opts["E"])
    weighting = TfidfTransformer(norm=None if opts["F"] else "l2", use_idf=opts["D"], smooth_idf=True, sublinear_tf=opts["C"])
    weighting.fit(doc_counts)
    # copy=False mirrors TfidfVectorizer; the count matrices are already private copies.
    return weighting.transform(doc_counts, copy=False), weighting.transform(query_counts, copy=False)


def predict(data: dict, mask: str, cache: RetrievalCache | None = None) -> dict[str, list[str]]:
    opts = options(mask, "retrieval")
    if cache is None:
        corpus = Corpus(data)
        doc_matrix, query_matrix = _matrices_cold(corpus, opts)
    else:
        if cache.data is not data:
            raise ValueError("retrieval cache was built for another prepared input")
        corpus = cache.corpus
        doc_matrix, query_matrix = _matrices_warm(cache, opts)

    scores = (query_matrix @ doc_matrix.T).toarray()
    ranking: dict[str, list[str]] = {}
    for row, query_id in enumerate(corpus.query_ids):
        if not np.all(np.isfinite(scores[row])):
            raise ValueError("Nonfinite retrieval scores")
        order = np.argsort(-scores[row], kind="stable")  # ties: lower sorted-document index first
        excluded = corpus.excluded[row]
        top: list[str] = []
        for index in order:
            if int(index) in excluded:
                continue
            top.append(corpus.doc_ids[index])
            if len(top) == TOP_K:
                break
        ranking[query_id] = top
    return ranking


def _ndcg_at_10(ranked: list[str], gains: dict[str, int]) -> float:
    if len(ranked) != TOP_K or len(set(ranked)) != TOP_K:
        raise ValueError("retrieval ranking must hold exactly 10 distinct documents")
    dcg = math.fsum(gains.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked))
    ideal = sorted(gains.values(), reverse=True)[:TOP_K]
    idcg = math.fsum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    # A query without any positive gain cannot be ranked well or badly; the cohorts never have one.
    return dcg / idcg if idcg > 0 else 0.0


def evaluate(data: dict, prediction: dict[str, list[str]]) -> dict:
    qrels = data["qrels"]
    per_query = [_ndcg_at_10(ranked, qrels.get(query_id, {})) for query_id, ranked in prediction.items()]
    value = float(np.mean(per_query))
    return result(value, "NDCG@10", value)


def truth(data: dict) -> dict:
    return {"qrels": data["qrels"], "query_ids": [q[0] for q in data["queries"]]}


# The worker builds this once per prepared input when a run asks to reuse the shared stage.
SharedStage = RetrievalCache
