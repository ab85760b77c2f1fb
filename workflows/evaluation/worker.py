"""The controls' worker: the JSON-lines protocol of workflows/protocol.py, with ``hello`` (the identity a
record worker reports, so the orchestrator admits it by the same rules: numerical profile, versions,
one thread, workflow code), ``controls`` (one task of workflows/evaluation/controls.py) and ``fit``
(an estimator on given observations, workflows/evaluation/estimators.py)."""

from __future__ import annotations

import os
import sys

from threadpoolctl import threadpool_limits

from workflows import records
from workflows.evaluation import controls, estimators
from workflows.protocol import Responses, protocol_output, serve


def main() -> None:
    protocol = protocol_output()
    threadpool_limits(limits=1)
    ops = {
        "hello": lambda _: records.hello(),
        "controls": lambda request: controls.run(request["task"]),
        "fit": lambda request: estimators.fit(request["task"]),
    }
    serve(sys.stdin, Responses(protocol), ops)
    protocol.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
