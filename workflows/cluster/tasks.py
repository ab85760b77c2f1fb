"""What a Dask worker runs for wwref. A worker computes records only after the bridge has admitted
its runtime identity; a task that reaches a worker not (yet) admitted is rescheduled elsewhere before
it computes anything. Prepared inputs arrive as bytes (scattered once per content hash and kept by
Dask on the workers, no shared filesystem), are checked against their sha256, decoded once per worker
process and frozen (workflows/container.py), so records share no state through them.

The bridge imports this module only to name its functions (Dask sends them by reference) and computes
nothing, so the computing libraries are imported where the functions run: on the workers, where the
preload has imported them already."""

from __future__ import annotations

import json
import platform
import traceback
from collections import OrderedDict
from typing import Any

from distributed import Reschedule, get_worker

# Decoded inputs a worker keeps (most recently used first out last); a catalog run touches one or two
# conditions at a time.
KEEP_INPUTS = 4
_inputs: OrderedDict[str, Any] = OrderedDict()
_stages: dict[str, Any] = {}


def identity(dask_worker) -> dict[str, Any]:
    """This worker's runtime identity (records.hello); client.run passes the worker."""
    from workflows import records

    return records.hello()


def admit(dask_worker) -> None:
    """Run by the bridge on a worker whose identity it accepted (client.run passes the worker)."""
    dask_worker.wwref_admitted = True


def _require_admission() -> None:
    if not getattr(get_worker(), "wwref_admitted", False):
        raise Reschedule()


def _data(files: dict[str, str], contents: dict[str, bytes]) -> tuple[str, Any]:
    from workflows.container import load_prepared_bytes

    key = json.dumps(files, sort_keys=True)
    if key in _inputs:
        _inputs.move_to_end(key)
        return key, _inputs[key]
    _inputs[key] = load_prepared_bytes(contents, files)
    while len(_inputs) > KEEP_INPUTS:
        old, _ = _inputs.popitem(last=False)
        _stages.pop(old, None)
    return key, _inputs[key]


def run(family: str, files: dict[str, str], contents: dict[str, bytes], masks: list[str], reuse_shared_stage: bool) -> list[dict[str, Any]]:
    """Records of one input, one after the other (the bridge groups small records into one task to
    spare the scheduler). Each outcome is ``{"ok": result}`` or ``{"error": [type, message, traceback]}``:
    a record that raises fails alone."""
    from workflows import records
    from workflows.families import FAMILIES

    _require_admission()
    key, data = _data(files, contents)
    stage = None
    shared = getattr(FAMILIES[family], "SharedStage", None)
    if reuse_shared_stage and shared is not None:
        if key not in _stages:
            _stages[key] = shared(data)
        stage = _stages[key]
    outcomes = []
    for mask in masks:
        try:
            outcomes.append({"ok": {**records.run_record(family, data, mask, stage), "host": platform.node()}})
        except Exception as error:
            outcomes.append({"error": [type(error).__name__, str(error), traceback.format_exc()]})
    return outcomes


def truth(family: str, files: dict[str, str], contents: dict[str, bytes]) -> dict[str, Any]:
    from workflows import records

    _require_admission()
    return records.truth(family, _data(files, contents)[1])
