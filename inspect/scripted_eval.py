"""The whatworked task run offline with Inspect's `mockllm/model`, scripted: no provider, no network.

    inspect/.venv/bin/python inspect/scripted_eval.py PLAN.json

Inspect scripts its mock model through its Python API only (`get_model("mockllm/model",
custom_outputs=…)`), so this runs the real eval (`inspect_ai.eval`, the same task file, the same log)
from Python. The plan (JSON) names the task arguments, the log folder and, per sample id
`<condition>__b<B>__r<repeat>`, a behaviour:

- `design`: reads `task`, buys the masks given in `designs["<condition>__b<B>"]` in one `observe`, then
  submits `{"estimator": "ridge_pair"}` (with the greedy degree-2 design's masks: the `design_degree2` control);
- `numpy`: buys the first masks of the design, fits main effects by least squares with NumPy in
  `calculate_python`, reads the printed table from the tool's result and submits it as `predictions_json`;
- `malformed`: sends tool calls the tools refuse (a string for a list, an unknown argument, arguments that
  are no JSON, a table with a text value), then fails as a model would (an exception): undelivered;
- `silent`: answers in prose and never calls a tool, until the message limit ends the sample;
- `slow`: takes 120 s to answer each turn (past a short `session_seconds`: the session ends the sample).

Behaviours are chosen by repeat: `behaviours[str(repeat)]`. The log's path is printed on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from inspect_ai import eval as inspect_eval
from inspect_ai.log._samples import sample_active
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolCall

HERE = Path(__file__).resolve().parent
MODEL = "mockllm/model"
SLOW_SECONDS = 120

# The numpy behaviour's calculation: main effects by least squares on the masks bought so far, every mask predicted.
FIT_CODE = """import json, itertools
import numpy as np
width = len(observations[0]["mask"])
rows = lambda mask: [1.0] + [1.0 if c == "1" else -1.0 for c in mask]
X = np.array([rows(o["mask"]) for o in observations])
y = np.array([o["utility"] for o in observations])
coef, *_ = np.linalg.lstsq(X, y, rcond=None)
masks = ["".join(bits) for bits in itertools.product("01", repeat=width)]
table = {m: float(np.clip(np.array(rows(m)) @ coef, 0.0, 1.0)) for m in masks}
print(json.dumps(table))
"""


def output(message: str, calls: list[ToolCall] | None = None) -> ModelOutput:
    """One model turn (usage given: mockllm would otherwise count tokens with a tokenizer it downloads)."""
    out = ModelOutput.from_content(model=MODEL, content=message)
    out.choices[0].message.tool_calls = calls or None
    out.choices[0].stop_reason = "tool_calls" if calls else "stop"
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


def call(function: str, arguments: dict[str, Any], turn: int, parse_error: str | None = None) -> ToolCall:
    return ToolCall(id=f"call_{turn}_{function}", function=function, arguments=arguments, parse_error=parse_error)


def last_tool_result(messages: list[ChatMessage]) -> dict[str, Any]:
    """The JSON of the last tool result in the conversation."""
    tool = next(m for m in reversed(messages) if isinstance(m, ChatMessageTool))
    return json.loads(tool.text)


def design_turn(turn: int, design: list[str], messages: list[ChatMessage]) -> ModelOutput:
    if turn == 0:
        return output("Reading the task.", [call("task", {}, turn)])
    if turn == 1:
        return output("Buying the greedy degree-2 design.", [call("observe", {"masks": design}, turn)])
    if turn == 2:
        return output("Submitting the pair-effect ridge.", [call("submit_diagnosis", {"estimator": "ridge_pair"}, turn)])
    return output("Submitted.")


def numpy_turn(turn: int, design: list[str], messages: list[ChatMessage]) -> ModelOutput:
    if turn == 0:
        return output("Buying masks.", [call("observe", {"masks": design}, turn)])
    if turn == 1:
        return output("Fitting main effects with NumPy.", [call("calculate_python", {"code": FIT_CODE}, turn)])
    if turn == 2:
        result = last_tool_result(messages)
        table = json.loads(result["stdout"])
        return output("Submitting the fitted table.", [call("submit_diagnosis", {"predictions_json": table}, turn)])
    return output("Submitted.")


def malformed_turn(turn: int, design: list[str], messages: list[ChatMessage]) -> ModelOutput:
    if turn == 0:
        return output("Buying a mask.", [call("observe", {"masks": "0101"}, turn)])
    if turn == 1:
        return output("Buying a mask.", [call("observe", {"mask": ["0101"]}, turn)])
    if turn == 2:
        return output("Buying a mask.", [call("observe", {}, turn, parse_error="Expecting ',' delimiter: line 1 column 12")])
    if turn == 3:
        return output("Submitting.", [call("submit_diagnosis", {"predictions_json": {"0000": "high"}}, turn)])
    raise RuntimeError("scripted model failure after malformed calls")


def silent_turn(turn: int, design: list[str], messages: list[ChatMessage]) -> ModelOutput:
    return output(f"Thinking about the surface (turn {turn}).")


def slow_turn(turn: int, design: list[str], messages: list[ChatMessage]) -> Awaitable[ModelOutput]:
    async def answer() -> ModelOutput:
        await anyio.sleep(SLOW_SECONDS)
        return output(f"Still thinking (turn {turn}).")

    return answer()


BEHAVIOURS: dict[str, Callable[..., Any]] = {
    "design": design_turn,
    "numpy": numpy_turn,
    "malformed": malformed_turn,
    "silent": silent_turn,
    "slow": slow_turn,
}


def scripted(plan: dict[str, Any]):
    """mockllm's custom_outputs: the turn of the active sample's behaviour, from the conversation so far."""

    def generate(messages: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput | Awaitable[ModelOutput]:
        active = sample_active()
        assert active is not None and active.sample.id is not None
        condition_budget, repeat = str(active.sample.id).rsplit("__r", 1)
        behaviour = BEHAVIOURS[plan["behaviours"][repeat]]
        turn = sum(1 for m in messages if isinstance(m, ChatMessageAssistant))
        return behaviour(turn, plan.get("designs", {}).get(condition_budget, []), messages)

    return generate


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    model = get_model(MODEL, custom_outputs=scripted(plan), memoize=False)
    logs = inspect_eval(
        f"{HERE / 'whatworked.py'}@whatworked",
        model=model,
        task_args=plan["task_args"],
        log_dir=plan["log_dir"],
        log_format=plan.get("log_format", "eval"),
        max_samples=plan.get("max_samples", 2),
        display="none",
    )
    for log in logs:
        print(log.location)
    if any(log.status != "success" for log in logs):
        sys.exit(1)


if __name__ == "__main__":
    main()
