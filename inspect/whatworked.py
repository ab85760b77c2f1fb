"""WhatWorkedBench as an Inspect AI task.

    inspect eval inspect/whatworked.py --model PROVIDER/MODEL -T conditions=wine,concrete -T budgets=4,8 -T repeats=3

One sample per (condition, budget, repeat). Each starts a wwref episode (`wwref episode start`), gives the
model the episode's MCP tools (`wwref serve --episode DIR`, stdio) and its prompt (the MCP prompt
`episode`), runs a ReAct agent until it submits or a limit ends it, and scores it with wwref's scorer
(`wwref episode score`). Task arguments:

- conditions: condition ids (default: every condition of the catalog)
- budgets: credits beyond the two free anchors (default 4,8)
- repeats: samples per (condition, budget) (default 1)
- session_seconds: each episode's deadline and the agent's time limit (default 1800, the benchmark's)
- calls, call_seconds: calculation calls per episode and wall seconds per call (default 20 and 45)
- max_messages: the agent's conversation limit, in messages (default 200)
- episodes: the folder of the episode folders (default: beside the log, `<log name>.episodes/`)
- references: the reference folder (default wwref's, outputs/references)
- engine: the calculation engine, native (default) or pyodide
"""

import sys
from pathlib import Path

from inspect_ai import Task, task

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wwref_inspect.agent import episode_agent  # noqa: E402
from wwref_inspect.dataset import DEFAULT_BUDGETS, as_list, samples, whole  # noqa: E402
from wwref_inspect.scoring import episode_score  # noqa: E402


@task
def whatworked(
    conditions: str | list[str] | None = None,
    budgets: str | int | list[int] = DEFAULT_BUDGETS,
    repeats: int = 1,
    session_seconds: int = 1800,
    calls: int = 20,
    call_seconds: int = 45,
    max_messages: int = 200,
    episodes: str | None = None,
    references: str | None = None,
    engine: str | None = None,
) -> Task:
    """WhatWorkedBench episodes, one per (condition, budget, repeat), scored by wwref."""
    session = whole(session_seconds, "session_seconds", 1)
    return Task(
        dataset=samples(
            as_list(conditions, "conditions") or None,
            [whole(b, "budgets") for b in as_list(budgets, "budgets")],
            whole(repeats, "repeats", 1),
        ),
        solver=episode_agent(
            session_seconds=session,
            calls=whole(calls, "calls", 1),
            call_seconds=whole(call_seconds, "call_seconds", 1),
            max_messages=whole(max_messages, "max_messages", 2),
            episodes=episodes,
            references=references,
            engine=engine,
        ),
        scorer=episode_score(),
    )
