"""An example agent: the pair-effect ridge design, through MCP alone.

Run by `wwref cohort run --agent 'python examples/agents/pair_ridge.py' …`, once per episode. It reads
the endpoint the cohort gives it (WWREF_MCP_URL and WWREF_MCP_TOKEN for Streamable HTTP, else
WWREF_MCP_COMMAND, a JSON list, for stdio), then: `task` (the width and the budget), one `observe`
of the masks the greedy variance design of degree 2 buys (it never looks at a utility, so one batch
in its order is the same acquisition as one mask at a time), and `submit_diagnosis` of the pair-effect ridge
table fitted on the anchors and the purchases. The design and the ridge are the project's own code
(workflows/evaluation/, imported, not copied), run by NumPy at the pinned runtime's version under the
numerical profile's kernel settings and one thread that the cohort sets: so its records are the
`design_degree2` controls' records.

It runs in its own environment, examples/agents/.venv (the official MCP Python SDK and NumPy, made by
`npm run setup`, i.e. scripts/setup-agents): started by another Python, it starts itself again there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agents_env import run_in_agents_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
run_in_agents_env(__file__, "pair_ridge")

import asyncio  # noqa: E402
import json  # noqa: E402

import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

sys.path.insert(0, str(ROOT))
from workflows.evaluation import estimators, ridge  # noqa: E402
from workflows.evaluation.surface import feature_rows, mask_string  # noqa: E402


def endpoint():
    """The episode's MCP server, as the cohort's environment names it."""
    url = os.environ.get("WWREF_MCP_URL")
    if url:
        headers = {"Authorization": f"Bearer {os.environ['WWREF_MCP_TOKEN']}"}
        return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)))
    command = json.loads(os.environ["WWREF_MCP_COMMAND"])
    return StdioServerParameters(command=command[0], args=command[1:])


async def call(client: Client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    if result.is_error:
        raise RuntimeError(f"{tool} refused: {text}")
    return json.loads(text)


async def main() -> None:
    async with Client(endpoint(), mode="legacy") as client:
        task = await call(client, "task", {})
        width, budget = task["dimensions"], task["budget"]
        anchors = [(o["mask"], o["utility"]) for o in task["free_observations"]]
        rows = feature_rows(width, 2)
        design = ridge.greedy_design(rows, [0, 2**width - 1], budget)
        bought: list[tuple[str, float]] = []
        if design:
            answer = await call(client, "observe", {"masks": [mask_string(k, width) for k in design]})
            bought = [(o["mask"], o["utility"]) for o in answer["observations"]]
        fitted = estimators.fit({"width": width, "estimator": "ridge_pair", "observations": anchors + bought})
        table = {mask_string(k, width): value for k, value in enumerate(fitted["prediction"])}
        await call(client, "submit_diagnosis", {"predictions_json": table})


if __name__ == "__main__":
    asyncio.run(main())
