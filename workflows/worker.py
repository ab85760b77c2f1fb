"""Persistent worker: one JSON request per stdin line, one JSON response per stdout line.

Requests ``{"id": n, "op": ..., ...}``; responses ``{"id": n, "ok": true, "result": {...}}`` or
``{"id": n, "ok": false, "error": {"type", "message", "traceback"}}``. The TypeScript side
(pipelines/execution/python-worker.ts) validates every response with zod.

Operations:
* ``hello``: interpreter, the versions of the packages that decide bits, thread pools, the
  numerical state (workflows/numerics.py: CPU, BLAS kernels, NumPy SIMD dispatch) and the families
  this worker implements (mask widths, hash rule);
* ``run`` {family, folder, mask, cold, reuse_shared_stage}: predict and evaluate one configuration on
  the prepared input in ``folder`` (cached across requests unless ``cold``: then it is read from disk
  for this record only and nothing is kept). With ``reuse_shared_stage`` a family that declares a
  ``SharedStage`` (retrieval: term counts) builds it once per input and reuses it across masks; the
  default is the cold path, and tests prove both give identical predictions;
* ``truth`` {family, folder}: the held-out truth the independent TypeScript metric needs;
* ``prepare`` {recipe, params, raw, out}: run a preparation recipe and write a prepared input.

Everything a library prints goes to stderr; stdout carries the protocol only. The thread variables
(OMP_NUM_THREADS, ...) are set to 1 by the orchestrator before this process starts, and every
record runs inside a threadpoolctl limit of one thread.
"""
from __future__ import annotations

import base64
import json
import os
import platform
import sys
import time
import traceback
import warnings
from importlib import metadata as importlib_metadata
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from workflows.container import read_prepared
from workflows.families import FAMILIES
from workflows.hashing import prediction_sha256
from workflows import numerics

REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt")


def bit_deciding_packages() -> list[str]:
    """The packages marked "decides bits" in workflows/requirements.txt, in file order."""
    with open(REQUIREMENTS, encoding="utf-8") as pins:
        return [line.split("==")[0].strip().lower() for line in pins if "==" in line and "# decides bits" in line]


def encode(value: Any) -> Any:
    """An ndarray as dtype/shape/base64 of its C-order bytes; anything else as plain JSON."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {"ndarray": {"dtype": array.dtype.str, "shape": list(array.shape),
                            "base64": base64.b64encode(array.tobytes()).decode("ascii")}}
    return {"json": value}


def to_json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class Worker:
    def __init__(self) -> None:
        self._cache: dict[str, dict[str, Any]] = {}
        self._stages: dict[str, Any] = {}
        # Test-only switches: slow every record down (timing checks, timeouts), or end the process in
        # the middle of one mask's record (crash handling), so executors can be shown to handle both.
        self._delay = float(os.environ.get("WWREF_TEST_DELAY_SECONDS", "0") or 0)
        self._exit_on_mask = os.environ.get("WWREF_TEST_EXIT_ON_MASK")

    def _data(self, folder: str, cold: bool) -> dict[str, Any]:
        if cold:
            self._cache.clear()
            self._stages.clear()
            return read_prepared(folder)
        if folder not in self._cache:
            self._cache[folder] = read_prepared(folder)
        return self._cache[folder]

    def hello(self, _: dict) -> dict:
        versions = {name: importlib_metadata.version(name) for name in bit_deciding_packages()}
        pools = [{"api": p.get("internal_api"), "num_threads": p.get("num_threads")} for p in threadpool_info()]
        families = {name: {"dimensions": list(module.DIMENSIONS), "hash_rule": module.HASH_RULE} for name, module in FAMILIES.items()}
        return {"python": platform.python_version(), "versions": versions, "pid": os.getpid(), "threadpools": pools,
                "numerics": numerics.report(), "families": families}

    def run(self, request: dict) -> dict:
        family = FAMILIES[request["family"]]
        folder = request["folder"]
        data = self._data(folder, bool(request.get("cold", False)))
        mask = request["mask"]
        if mask == self._exit_on_mask:
            os._exit(70)
        with threadpool_limits(limits=1), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            stage = getattr(family, "SharedStage", None)
            if request.get("reuse_shared_stage") and stage is not None:
                if folder not in self._stages:
                    self._stages[folder] = stage(data)
                prediction = family.predict(data, mask, cache=self._stages[folder])
            else:
                prediction = family.predict(data, mask)
            middle = time.perf_counter()
            result = family.evaluate(data, prediction)
            end = time.perf_counter()
        if self._delay:
            time.sleep(self._delay)
            end += self._delay
        return {
            "prediction": encode(prediction if isinstance(prediction, np.ndarray) else to_json_value(prediction)),
            "prediction_sha256": prediction_sha256(family.HASH_RULE, prediction),
            "native_metric": result["native_metric"],
            "native_value": float(result["native_value"]),
            "utility": float(result["utility"]),
            "normalization_scale": None if result.get("normalization_scale") is None else float(result["normalization_scale"]),
            "extras": to_json_value(result.get("extras", {})),
            "warnings": [{"category": w.category.__name__, "message": str(w.message)} for w in caught],
            "prediction_wall_seconds": middle - start,
            "metric_wall_seconds": end - middle,
            "wall_seconds": end - start,
        }

    def truth(self, request: dict) -> dict:
        family = FAMILIES[request["family"]]
        data = self._data(request["folder"], bool(request.get("cold", False)))
        return {"truth": {key: encode(value) for key, value in family.truth(data).items()}}

    def prepare(self, request: dict) -> dict:
        from workflows.prepare import run_recipe
        return run_recipe(request["recipe"], request["params"], request["raw"], request["out"])


def main() -> None:
    protocol = sys.stdout
    sys.stdout = sys.stderr  # library chatter must never corrupt the protocol stream
    worker = Worker()
    ops = {"hello": worker.hello, "run": worker.run, "truth": worker.truth, "prepare": worker.prepare}
    for line in sys.stdin:
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op = request.get("op")
            if op == "shutdown":
                break
            if op not in ops:
                raise ValueError(f"unknown operation {op!r}")
            text = json.dumps({"id": request_id, "ok": True, "result": ops[op](request)}, allow_nan=False)
        except Exception as error:  # reported to the orchestrator, which decides what fails (a NaN in a result too)
            text = json.dumps({"id": request_id, "ok": False, "error": {
                "type": type(error).__name__, "message": str(error), "traceback": traceback.format_exc()}})
        protocol.write(text + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
