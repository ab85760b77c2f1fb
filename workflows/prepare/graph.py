"""Recipe ``newman_graph``: a GML network -> graph link-prediction input (docs/recipes.md).

NetworkX reads the GML; the graph is made simple, undirected and unweighted, self-loops are dropped and
nodes are numbered 0..n-1 in file order. With ``duplicate_edges`` "merge", an edge listed more than once
(football lists three twice, which NetworkX refuses in a simple graph) is kept once; "error" refuses it.
Split (one generator g = default_rng(split_seed), m = round(holdout_fraction x |E|)):
* E = sorted (min, max) edge pairs, shuffled by g.permutation: the first |E| - 2m are the observed
  edges, the next m the calibration positives, the last m the test positives;
* non-edges of the full graph (i < j, lexicographic), reordered by the continued g.permutation: the
  first m are the calibration negatives, the next m the test negatives;
* fit/test pairs = positives then negatives, labels m ones then m zeros.
Arrays, all int64, in this order: n_nodes (0-d), observed_edges, fit_pairs, fit_labels, test_pairs,
test_labels (order and dtypes recovered by matching the published files, scripts/recover/README.md).
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx
import numpy as np

from workflows.container import write_prepared
from workflows.prepare._params import Params


def _read_gml(path: str, duplicate_edges: str) -> tuple[nx.Graph, int]:
    """The simple undirected graph and the number of duplicate edge records merged."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if duplicate_edges == "merge":
        # NetworkX keeps parallel edges only in a multigraph; declare one, then collapse it.
        text, declared = re.subn(r"\bgraph\s*\[", "graph [\n  multigraph 1", text, count=1)
        if not declared:
            raise ValueError(f"newman_graph: {path} has no 'graph [' block")
    try:
        parsed = nx.parse_gml(text, label="id")
    except nx.NetworkXError as error:
        raise ValueError(f"newman_graph: {path}: {error} (set duplicate_edges to 'merge' to keep one copy)") from error
    graph = nx.Graph(parsed.to_undirected() if parsed.is_directed() else parsed)
    return graph, parsed.number_of_edges() - graph.number_of_edges()


def run(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    path = p.raw_file("file", raw)
    split_seed = p.get("split_seed")
    fraction = p.get("holdout_fraction")
    duplicate_edges = p.get("duplicate_edges")

    graph, merged = _read_gml(path, duplicate_edges)
    position = {node: i for i, node in enumerate(graph.nodes)}  # file order
    n = len(position)
    self_loops = nx.number_of_selfloops(graph)
    edges = np.array(
        sorted({(min(position[u], position[v]), max(position[u], position[v])) for u, v in graph.edges if u != v}), dtype=np.int64
    )
    m = round(fraction * len(edges))
    if m == 0 or len(edges) - 2 * m < 1:
        raise ValueError(f"newman_graph: {len(edges)} edges cannot give two hold-out sets of round({fraction}·E) = {m}")

    g = np.random.default_rng(split_seed)
    shuffled = edges[g.permutation(len(edges))]
    observed, fit_pos, test_pos = shuffled[: len(edges) - 2 * m], shuffled[len(edges) - 2 * m : len(edges) - m], shuffled[len(edges) - m :]
    adjacency = np.zeros((n, n), dtype=bool)
    adjacency[edges[:, 0], edges[:, 1]] = True
    rows, cols = np.triu_indices(n, k=1)  # every pair i < j in lexicographic order
    free = ~adjacency[rows, cols]
    non_edges = np.column_stack([rows[free], cols[free]]).astype(np.int64)
    if len(non_edges) < 2 * m:
        raise ValueError(f"newman_graph: only {len(non_edges)} non-edges for {2 * m} negative pairs")
    order = g.permutation(len(non_edges))
    fit_neg, test_neg = non_edges[order[:m]], non_edges[order[m : 2 * m]]
    labels = np.concatenate([np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)])

    write_prepared(
        out,
        [
            ("n_nodes", np.array(n, dtype=np.int64)),
            ("observed_edges", observed),
            ("fit_pairs", np.concatenate([fit_pos, fit_neg])),
            ("fit_labels", labels),
            ("test_pairs", np.concatenate([test_pos, test_neg])),
            ("test_labels", labels.copy()),
        ],
        {},
    )
    return {
        "nodes": n,
        "source_edges": int(len(edges)),
        "observed_edges": int(len(observed)),
        "calibration_pairs": 2 * m,
        "test_pairs": 2 * m,
        "test_positive_pairs": m,
        "split_seed": split_seed,
        "duplicate_edge_records_merged": merged,
        "self_loops_dropped": self_loops,
    }
