"""Persistent worker: one JSON request per stdin line, one JSON response per stdout line.

Requests ``{"id": n, "op": ..., ...}``; responses ``{"id": n, "ok": true, "attachment": k, "result": {...}}``
followed by ``k`` raw bytes, or ``{"id": n, "ok": false, "error": {"type", "message", "traceback"}}``.
An ndarray in a result is ``{"ndarray": {"dtype", "shape", "offset", "nbytes"}}``: its C-order bytes
are that slice of the attachment, so large predictions cross without base64 or JSON escaping. The TypeScript side
(pipelines/execution/python-worker.ts) validates every response with zod.

Operations:
* ``hello``: interpreter, the versions of the packages that decide bits, thread pools, the
  numerical state (workflows/numerics.py: CPU, BLAS kernels, NumPy SIMD dispatch) and the families
  this worker implements (mask widths, hash rule);
* ``run`` {family, folder, files, mask, reuse_shared_stage}: predict and evaluate one configuration
  on the prepared input in ``folder``. The input is read once per process, its files checked against
  the sha256 in ``files``, and kept frozen (workflows/container.py), so every record starts from the
  same read-only values. With ``reuse_shared_stage`` a family that declares a ``SharedStage``
  (retrieval: term counts) builds it once per input and reuses it across masks; by default nothing
  computed for one record is kept, and tests prove both give identical predictions;
* ``truth`` {family, folder, files}: the held-out truth the independent TypeScript metric needs;
* ``prepare`` {recipe, params, raw, out}: run a preparation recipe and write a prepared input;
* ``fork`` {socket}: a fresh worker, forked from this one, that serves the same protocol on the Unix
  socket the orchestrator listens on. The orchestrator asks this of a template process that has only
  imported the libraries and answered its hello, so a fork starts in milliseconds from a state no
  record has touched (pipelines/execution/python-worker.ts).

Everything a library prints goes to stderr (Python's and the C level's stdout are redirected); the
protocol has its own descriptor. The thread variables (OMP_NUM_THREADS, ...) are set to 1 by the
orchestrator before this process starts, and threadpoolctl limits every pool to one thread at start
(hello reports the pools, and the orchestrator refuses a worker with more).
"""
from __future__ import annotations

import functools
import json
import os
import platform
import signal
import socket
import sys
import time
import traceback
import warnings
from importlib import metadata as importlib_metadata
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from workflows.container import load_prepared
from workflows.families import FAMILIES
from workflows.hashing import prediction_sha256
from workflows import numerics

REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt")


@functools.cache
def loaded_versions() -> dict[str, str]:
    """The versions of the bit-deciding packages this process image imported: read once, so a fork
    reports its template's (the code it runs), even if the installation changed since."""
    return {name: importlib_metadata.version(name) for name in bit_deciding_packages()}


def bit_deciding_packages() -> list[str]:
    """The packages marked "decides bits" in workflows/requirements.txt, in file order."""
    with open(REQUIREMENTS, encoding="utf-8") as pins:
        return [line.split("==")[0].strip().lower() for line in pins if "==" in line and "# decides bits" in line]


class Binary:
    """An ndarray to be sent as bytes of the response's attachment."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)


def encode(value: Any) -> Any:
    """An ndarray as its C-order bytes (an attachment); anything else as plain JSON."""
    if isinstance(value, np.ndarray):
        return {"ndarray": Binary(value)}
    return {"json": value}


def response(request_id: Any, result: Any) -> bytes:
    """A success response: the JSON line, then the attachment holding every ndarray's bytes."""
    parts: list[bytes] = []
    size = 0

    def attach(value: Any) -> Any:
        nonlocal size
        if not isinstance(value, Binary):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        data = value.array.tobytes()
        parts.append(data)
        size += len(data)
        return {"dtype": value.array.dtype.str, "shape": list(value.array.shape), "offset": size - len(data), "nbytes": len(data)}

    body = json.dumps(result, default=attach, allow_nan=False)
    head = f'{{"id":{json.dumps(request_id)},"ok":true,"attachment":{size},"result":{body}}}\n'
    return head.encode("utf-8") + b"".join(parts)


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

    def _data(self, request: dict) -> dict[str, Any]:
        key = json.dumps([request["folder"], request["files"]], sort_keys=True)
        if key not in self._cache:
            self._cache[key] = load_prepared(request["folder"], request["files"])
        return self._cache[key]

    def hello(self, _: dict) -> dict:
        versions = loaded_versions()
        pools = [{"api": p.get("internal_api"), "num_threads": p.get("num_threads")} for p in threadpool_info()]
        families = {name: {"dimensions": list(module.DIMENSIONS), "hash_rule": module.HASH_RULE} for name, module in FAMILIES.items()}
        return {"python": platform.python_version(), "versions": versions, "pid": os.getpid(), "threadpools": pools,
                "numerics": numerics.report(), "families": families}

    def run(self, request: dict) -> dict:
        family = FAMILIES[request["family"]]
        folder = request["folder"]
        data = self._data(request)
        mask = request["mask"]
        if mask == self._exit_on_mask:
            os._exit(70)
        with warnings.catch_warnings(record=True) as caught:
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
        data = self._data(request)
        return {"truth": {key: encode(value) for key, value in family.truth(data).items()}}

    def prepare(self, request: dict) -> dict:
        from workflows.prepare import run_recipe
        return run_recipe(request["recipe"], request["params"], request["raw"], request["out"])


def serve(worker: Worker, requests, responses, ops: dict) -> None:
    """Answers one JSON request per line (text ``requests``) on the binary stream ``responses``,
    until end of input or a shutdown request."""
    for line in requests:
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
            data = response(request_id, ops[op](request))
        except Exception as error:  # reported to the orchestrator, which decides what fails (a NaN in a result too)
            data = (json.dumps({"id": request_id, "ok": False, "error": {
                "type": type(error).__name__, "message": str(error), "traceback": traceback.format_exc()}}) + "\n").encode("utf-8")
        responses.write(data)
        responses.flush()


def operations(worker: Worker) -> dict:
    return {"hello": worker.hello, "run": worker.run, "truth": worker.truth, "prepare": worker.prepare}


def forked(address: str, template_fds: list[int]) -> None:
    """The child side of ``fork``: drop the template's pipes, serve on the socket, exit."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd in template_fds:
            os.close(fd)
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(address)
        worker = Worker()
        serve(worker, connection.makefile("r", encoding="utf-8"), connection.makefile("wb"), operations(worker))
        status = 0
    finally:
        os._exit(status)


def main() -> None:
    # The protocol gets its own descriptor; descriptor 1 and sys.stdout become stderr, so that nothing
    # a library prints (from Python or C) can corrupt the stream.
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    threadpool_limits(limits=1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked workers are reaped by the kernel
    worker = Worker()
    ops = operations(worker)

    def fork(request: dict) -> dict:
        pid = os.fork()
        if pid == 0:
            forked(request["socket"], [protocol.fileno()])
        return {"pid": pid}

    ops["fork"] = fork
    serve(worker, sys.stdin, protocol, ops)


if __name__ == "__main__":
    main()
