"""The task's samples: one per (condition, budget, repeat), with the catalog facts the metrics group by.

The conditions and their families, sources and widths come from `wwref list --json` (the catalog), so
a condition the catalog does not know is refused before the eval starts. A sample's id is the cohort's
episode id, `<condition>__b<B>__r<repeat>`, which `wwref cohort import` reads back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.dataset import MemoryDataset, Sample

from .wwref import WwrefError, wwref_now

#: The published agent runs' budgets (the benchmark's agents were run at B = 4 and 8).
DEFAULT_BUDGETS = "4,8"


def as_list(value: Any, name: str) -> list[str]:
    """A task argument given as `a,b`, as a YAML list or as one value, as a list of strings."""
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    out = [str(item).strip() for item in items if str(item).strip()]
    if not out:
        raise ValueError(f"-T {name}= names nothing")
    return out


def whole(value: Any, name: str, least: int = 0) -> int:
    """A whole number task argument (given as 8 or '8'), at least `least`."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"-T {name} takes a whole number of at least {least}, not {value!r}")
    return int(text)


def track(condition: dict[str, Any]) -> str:
    """The condition's track as the controls name it (four options; six paired with a four-option one; six added)."""
    if condition["dimensions"] == 4:
        return "four"
    return "six" if condition.get("paired_with") else "six_added"


def catalog() -> dict[str, dict[str, Any]]:
    """The catalog's conditions by id."""
    try:
        listing = wwref_now("list", "--json")
    except WwrefError as error:
        raise ValueError(str(error)) from None
    return {c["condition"]: c for c in listing["conditions"]}


def samples(conditions: Sequence[str] | None, budgets: Sequence[int], repeats: int) -> MemoryDataset:
    """One sample per (condition, budget, repeat), in that order; every condition of the catalog by default."""
    known = catalog()
    chosen = list(conditions) if conditions else sorted(known)
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ValueError(f"-T conditions: {', '.join(unknown)} not in the catalog (`wwref list` names them)")
    out: list[Sample] = []
    for name in dict.fromkeys(chosen):
        condition = known[name]
        most = 2 ** condition["dimensions"] - 2
        for budget in sorted(set(budgets)):
            if budget > most:
                raise ValueError(f"-T budgets: {name} has {most} masks beyond the two free anchors (budgets 0 … {most})")
            for repeat in range(repeats):
                out.append(
                    Sample(
                        id=f"{name}__b{budget}__r{repeat}",
                        # replaced by the episode's own prompt (MCP prompt `episode`) once the episode has started
                        input=f"WhatWorkedBench episode: condition {name}, budget {budget}.",
                        metadata={
                            "condition": name,
                            "instance": condition["source"],
                            "family": condition["family"],
                            "track": track(condition),
                            "dimensions": condition["dimensions"],
                            "budget": budget,
                            "repeat": repeat,
                        },
                    )
                )
    return MemoryDataset(out, name="whatworked")
