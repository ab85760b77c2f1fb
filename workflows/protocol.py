"""The JSON-lines protocol (pipelines/execution/protocol.ts is the other side): its wire format, and the
one loop that serves it, for the worker (workflows/worker.py) and the Dask bridge (workflows/cluster/bridge.py).

Requests are one JSON object per line. A success response is the line
``{"id": n, "ok": true, "attachment": k, "result": {...}}`` followed by ``k`` raw bytes; an error is
``{"id": n, "ok": false, "error": {"type", "message", "traceback"}}``. An ndarray in a result is written
as ``{"ndarray": {"dtype", "shape", "offset", "nbytes"}}``: its C-order bytes are that slice of the
attachment, so large predictions cross without base64 or JSON escaping.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np


class Binary:
    """An ndarray to be sent as bytes of the response's attachment."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)


def encode(value: Any) -> Any:
    """An ndarray as its C-order bytes (an attachment); anything else as plain JSON."""
    if isinstance(value, np.ndarray):
        return {"ndarray": Binary(value)}
    return {"json": value}


def to_json_value(value: Any) -> Any:
    """Plain JSON types: dict keys as strings, tuples as lists, NumPy scalars as Python numbers."""
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def success(request_id: Any, result: Any) -> bytes:
    """A success response: the JSON line, then the attachment holding every ndarray's bytes."""
    parts: list[bytes] = []
    size = 0

    def attach(value: Any) -> Any:
        nonlocal size
        if not isinstance(value, Binary):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        data = value.array.reshape(-1).view(np.uint8)  # the C-order bytes, not copied until the join below
        parts.append(data)
        size += data.nbytes
        return {"dtype": value.array.dtype.str, "shape": list(value.array.shape), "offset": size - data.nbytes, "nbytes": data.nbytes}

    body = json.dumps(result, default=attach, allow_nan=False)
    head = f'{{"id":{json.dumps(request_id)},"ok":true,"attachment":{size},"result":{body}}}\n'
    return b"".join([head.encode("utf-8"), *parts])


def failure(request_id: Any, error: BaseException, type_name: str | None = None) -> bytes:
    """An error response naming the exception type (or ``type_name``) and its message."""
    return reported_failure(request_id, type_name or type(error).__name__, str(error), "".join(traceback.format_exception(error)))


def reported_failure(request_id: Any, type_name: str, message: str, trace: str) -> bytes:
    """An error response for an error raised elsewhere (a Dask worker), as it was reported there."""
    text = json.dumps({"id": request_id, "ok": False, "error": {"type": type_name, "message": message, "traceback": trace}})
    return (text + "\n").encode("utf-8")


def answer(request_id: Any, compute: Callable[[], Any]) -> bytes:
    """The response to one request: ``compute()``'s result, or the error it raised (a NaN too)."""
    try:
        return success(request_id, compute())
    except Exception as error:  # reported to the orchestrator, which decides what fails
        return failure(request_id, error)


def dispatch(ops: dict[str, Callable[[dict], Any]], request: dict) -> Any:
    op = request.get("op")
    if op not in ops:
        raise ValueError(f"unknown operation {op!r}")
    return ops[op](request)


def protocol_output() -> BinaryIO:
    """The protocol's own descriptor, a copy of stdout; descriptor 1 and sys.stdout become stderr, so that
    nothing a library prints (from Python or C) can corrupt the stream."""
    output = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return output


class Responses:
    """The binary stream responses are written to, one whole response at a time (the Dask bridge answers
    from several threads)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self.lock:
            self.stream.write(data)
            self.stream.flush()


def serve(
    requests, responses: Responses, ops: dict[str, Callable[[dict], Any]], later: dict[str, Callable[[dict], None]] | None = None
) -> None:
    """Answers one JSON request per line (text ``requests``) until end of input or a shutdown request:
    an operation of ``ops`` at once, in order; one of ``later`` (the Dask bridge's records) takes the
    request and answers it through ``responses`` when it is done, in any order (an error it raises at
    once is answered here)."""
    later = {} if later is None else later
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as error:
            responses.send(failure(None, error))
            continue
        op = request.get("op")
        if op == "shutdown":
            break
        if op in later:
            try:
                later[op](request)
            except Exception as error:  # a malformed request, answered at once
                responses.send(failure(request.get("id"), error))
        else:
            responses.send(answer(request.get("id"), lambda request=request: dispatch(ops, request)))
