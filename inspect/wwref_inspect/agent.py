"""One sample: a wwref episode started, served to a ReAct agent over MCP, run until it submits or a limit ends it.

The episode folder is `<episodes>/<sample id>` (by default beside the eval's log: `<log file without its
extension>.episodes/`). The model's tools are the episode's MCP tools (`task`, `status`, `observe`,
`calculate_python` where the sandbox can be made, `submit_diagnosis`), served by `wwref serve --episode
DIR` over stdio; its first message is the episode's MCP prompt `episode`. The agent loop goes on while
the episode is open: a turn without a tool call is answered with a reminder to submit. It ends when the
episode closes (a submission), at the session deadline, at the message limit, or when the model fails;
whichever it was is kept for the scorer, which ends an episode left open as undelivered with that reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from inspect_ai.agent import AgentState, react, run
from inspect_ai.log._samples import sample_active
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageUser
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import mcp_server_stdio
from inspect_ai.util import message_limit, time_limit
from mcp import Client, StdioServerParameters

from .wwref import ROOT, serve_command, server_environment, wwref

#: Where the episode folder and why the agent stopped are kept for the scorer (the sample's store).
EPISODE_KEY = "wwref_episode"
STOPPED_KEY = "wwref_stopped"

REMINDER = (
    "The episode is still open. Go on with the tools: buy masks with observe, compute with calculate_python if you "
    "need to, and finish with submit_diagnosis (predictions_json for every mask, or estimator ridge_main or ridge_pair)."
)


def episodes_folder(given: str | None) -> Path:
    """The folder of this eval's episode folders: the task's `episodes`, else beside the eval's log file.

    The log's location reaches a solver only through Inspect's active sample (no public accessor in 0.3.285).
    """
    if given:
        return Path(given).expanduser().resolve()
    active = sample_active()
    location = active.log_location if active else ""
    if not location or "://" in location:
        raise ValueError("the eval's log is not a local file: name a folder for the episodes with -T episodes=DIR")
    log = Path(location).resolve()
    return log.with_name(f"{log.stem}.episodes")


def closed(episode: Path) -> bool:
    """Whether the episode is closed, by its state copy (written after every commit)."""
    try:
        return json.loads((episode / "episode.json").read_text(encoding="utf-8")).get("closed") is True
    except (OSError, ValueError):
        return False


async def episode_prompt(episode: Path) -> list[ChatMessage]:
    """The episode's MCP prompt `episode`, as the conversation's first message(s)."""
    command, args = serve_command(episode)
    parameters = StdioServerParameters(command=command, args=args, cwd=str(ROOT), env=server_environment())
    async with Client(parameters, mode="legacy") as client:
        prompt = await client.get_prompt("episode")
    messages: list[ChatMessage] = []
    for message in prompt.messages:
        text = getattr(message.content, "text", None)
        if text is None:
            raise ValueError(f"the episode prompt holds a {message.content.type} message; only text is expected")
        messages.append(ChatMessageUser(content=text) if message.role == "user" else ChatMessageAssistant(content=text))
    return messages


def start_arguments(state: TaskState, episode: Path, limits: dict[str, int | str | None]) -> list[str]:
    """`wwref episode start` for this sample, with the eval's limits and the model as a label."""
    meta = state.metadata
    args = ["episode", "start", "--episode", str(episode), "--condition", meta["condition"], "--budget", str(meta["budget"])]
    args += ["--session-seconds", str(limits["session_seconds"]), "--calls", str(limits["calls"])]
    args += ["--call-seconds", str(limits["call_seconds"]), "--label", "agent=inspect-react", "--label", f"model={state.model}"]
    if limits.get("references"):
        args += ["--references", str(limits["references"])]
    if limits.get("engine"):
        args += ["--engine", str(limits["engine"])]
    return args


@solver
def episode_agent(
    session_seconds: int,
    calls: int,
    call_seconds: int,
    max_messages: int,
    episodes: str | None = None,
    references: str | None = None,
    engine: str | None = None,
) -> Solver:
    """Starts the sample's episode and runs a ReAct agent on its MCP tools until it submits or a limit ends it."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.epoch > 1:
            raise ValueError("one episode per sample: ask for repeats with -T repeats=N, not --epochs")
        episode = episodes_folder(episodes) / str(state.sample_id)
        limits = {"session_seconds": session_seconds, "calls": calls, "call_seconds": call_seconds}
        await wwref(*start_arguments(state, episode, {**limits, "references": references, "engine": engine}))
        state.store.set(EPISODE_KEY, str(episode))
        state.metadata[EPISODE_KEY] = str(episode)

        async def go_on(agent_state: AgentState) -> bool | str:
            if closed(episode):
                return False
            return True if agent_state.output.message.tool_calls else REMINDER

        command, args = serve_command(episode)
        server = mcp_server_stdio(name="wwref", command=command, args=args, cwd=ROOT, env=server_environment())
        agent = react(prompt=None, tools=[server], submit=False, on_continue=go_on)
        try:
            state.messages = await episode_prompt(episode)
            agent_state, limit = await run(agent, state.messages, limits=[time_limit(session_seconds), message_limit(max_messages)])
        except Exception as error:  # the model, its provider or the served episode failed: scored undelivered, the eval goes on
            state.store.set(STOPPED_KEY, f"the agent stopped on an error: {type(error).__name__}: {str(error)[:300]}")
            return state
        state.messages = agent_state.messages
        state.output = agent_state.output
        if limit is not None:
            what = f"the session's {session_seconds} s" if limit.type == "time" else f"{limit.limit} {limit.type}s"
            state.store.set(STOPPED_KEY, f"no submission within {what}: the agent was stopped")
        elif not closed(episode):
            state.store.set(STOPPED_KEY, "the agent ended without submitting")
        return state

    return solve
