"""wwref's own score of a sample, and the metrics over samples.

The scorer ends an episode the agent left open (`wwref episode end`, with why: the agent's limit, the
model's failure, or no submission), then takes `wwref episode score`: the value is `effect_recovery`
(0 for an undelivered episode, the benchmark's undelivered score), and the metadata hold every field of
the score, the shared-estimator scores and gains included, and the episode folder.

Metrics: the mean, the delivered share, and family-macro effect recovery per (track, budget) as the
paper averages (samples within a source, sources within a family, families with equal weight), keyed
`<track>_b<budget>`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from statistics import fmean
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, mean, metric, scorer
from inspect_ai.solver import TaskState

from .agent import EPISODE_KEY, STOPPED_KEY
from .wwref import wwref


def family_macro(items: Iterable[tuple[str, str, float]]) -> float:
    """The family-macro mean of (family, source, value): within a source, then within a family, then over families."""
    by_source: dict[tuple[str, str], list[float]] = defaultdict(list)
    for family, source, value in items:
        by_source[(family, source)].append(value)
    by_family: dict[str, list[float]] = defaultdict(list)
    for (family, _), values in by_source.items():
        by_family[family].append(fmean(values))
    return fmean(fmean(values) for values in by_family.values())


@metric
def family_macro_recovery() -> Metric:
    """Family-macro effect recovery per (track, budget), keyed `<track>_b<budget>`."""

    def compute(scores: list[SampleScore]) -> dict[str, float | None]:
        cells: dict[tuple[str, int], list[tuple[str, str, float]]] = defaultdict(list)
        for item in scores:
            meta = item.sample_metadata or {}
            cells[(meta["track"], int(meta["budget"]))].append((meta["family"], meta["instance"], item.score.as_float()))
        return {f"{track}_b{budget}": family_macro(items) for (track, budget), items in sorted(cells.items())}

    return compute


@metric
def delivered() -> Metric:
    """The share of samples whose episode was delivered (a submission the rules accepted)."""

    def compute(scores: list[SampleScore]) -> float:
        return fmean(1.0 if (item.score.metadata or {}).get("delivered") else 0.0 for item in scores) if scores else 0.0

    return compute


def why_open(state: TaskState) -> str:
    """Why an episode is still open when its sample is scored."""
    return state.store.get(STOPPED_KEY) or "the sample ended without a submission (an Inspect limit or an error)"


@scorer(metrics=[family_macro_recovery(), mean(), delivered()])
def episode_score() -> Scorer:
    """wwref's score of the sample's episode: effect recovery, every grade field in the metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        episode = state.store.get(EPISODE_KEY)
        if not episode:
            raise ValueError("the sample has no episode: it ended before `wwref episode start` did")
        status = await wwref("episode", "status", "--episode", episode)
        if not status["closed"]:
            await wwref("episode", "end", "--episode", episode, "--reason", why_open(state))
        scored: dict[str, Any] = await wwref("episode", "score", "--episode", episode)
        ended = scored.get("ended") or {}
        answer = "delivered" if scored["delivered"] else "undelivered"
        explanation = f"effect recovery {scored['effect_recovery']}"
        if not scored["delivered"]:
            explanation += f"; undelivered: {ended.get('reason')}"
        return Score(
            value=scored["effect_recovery"],
            answer=answer,
            explanation=explanation,
            metadata={"episode": episode, **scored},
        )

    return score
