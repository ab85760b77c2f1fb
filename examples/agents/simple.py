"""Example agents of two simple policies, for comparing agents (`wwref cohort compare`).

    python examples/agents/simple.py constant   # buys nothing; submits the mean of the two anchors everywhere
    python examples/agents/simple.py random     # buys the budget's masks in an order drawn from the episode id;
                                                # submits each mask's nearest observation (Hamming distance)

Run by `wwref cohort run --agent '… simple.py random' …`, once per episode, through MCP alone (the
endpoint as pair_ridge.py reads it; the same environment, examples/agents/.venv). Deterministic: the
random order is seeded by the episode's id, so a cohort run twice gives the same records.
"""

from __future__ import annotations

import os
import sys

from agents_env import run_in_agents_env

run_in_agents_env(__file__, "simple")

import asyncio  # noqa: E402
import random  # noqa: E402

from mcp import Client  # noqa: E402
from pair_ridge import call, endpoint  # noqa: E402


def nearest_table(width: int, observed: dict[str, float]) -> dict[str, float]:
    """Each mask's value: the observation nearest to it in Hamming distance (ties: the lexicographically first)."""
    table = {}
    for k in range(2**width):
        mask = format(k, f"0{width}b")
        distance = {m: sum(a != b for a, b in zip(mask, m, strict=True)) for m in observed}
        table[mask] = observed[min(sorted(observed), key=lambda m: distance[m])]
    return table


async def main(policy: str) -> None:
    async with Client(endpoint(), mode="legacy") as client:
        task = await call(client, "task", {})
        width, budget = task["dimensions"], task["budget"]
        observed = {o["mask"]: o["utility"] for o in task["free_observations"]}
        if policy == "constant":
            mean = sum(observed.values()) / len(observed)
            table = {format(k, f"0{width}b"): mean for k in range(2**width)}
        else:
            masks = [format(k, f"0{width}b") for k in range(1, 2**width - 1)]
            random.Random(os.environ.get("WWREF_EPISODE_ID", "")).shuffle(masks)
            if budget:
                answer = await call(client, "observe", {"masks": masks[:budget]})
                observed.update({o["mask"]: o["utility"] for o in answer["observations"]})
            table = nearest_table(width, observed)
        await call(client, "submit_diagnosis", {"predictions_json": table})


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("constant", "random"):
        sys.exit("usage: simple.py constant|random")
    asyncio.run(main(sys.argv[1]))
