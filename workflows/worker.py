"""Persistent worker: one JSON request per stdin line, one JSON response per stdout line.

The wire format is in workflows/protocol.py; records are computed by workflows/records.py. The TypeScript side
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

import json
import os
import signal
import socket
import sys
from typing import Any

from threadpoolctl import threadpool_limits

from workflows import records
from workflows.container import load_prepared
from workflows.families import FAMILIES
from workflows.protocol import Responses, protocol_output, serve

SEND_BUFFER_BYTES = 4 << 20


class Worker:
    def __init__(self) -> None:
        self._inputs: dict[str, dict[str, Any]] = {}
        self._stages: dict[str, Any] = {}

    def _data(self, request: dict) -> tuple[str, dict[str, Any]]:
        key = json.dumps([request["folder"], request["files"]], sort_keys=True)
        if key not in self._inputs:
            self._inputs[key] = load_prepared(request["folder"], request["files"])
        return key, self._inputs[key]

    def hello(self, _: dict) -> dict:
        return records.hello()

    def run(self, request: dict) -> dict:
        key, data = self._data(request)
        stage = None
        shared = getattr(FAMILIES[request["family"]], "SharedStage", None)
        if request.get("reuse_shared_stage") and shared is not None:
            if key not in self._stages:
                self._stages[key] = shared(data)
            stage = self._stages[key]
        return records.run_record(request["family"], data, request["mask"], stage)

    def truth(self, request: dict) -> dict:
        return records.truth(request["family"], self._data(request)[1])

    def prepare(self, request: dict) -> dict:
        from workflows.prepare import run_recipe

        return run_recipe(request["recipe"], request["params"], request["raw"], request["out"])

    def operations(self) -> dict:
        return {"hello": self.hello, "run": self.run, "truth": self.truth, "prepare": self.prepare}


def forked(address: str, template_fds: list[int]) -> None:
    """The child side of ``fork``: drop the template's pipes, serve on the socket, exit."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd in template_fds:
            os.close(fd)
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # A send buffer that holds a whole response (an image's prediction is 0.5 MB; the default holds
        # about 200 KB): the worker hands it to the kernel and begins the next request at once instead of
        # waiting until the orchestrator has read most of it. The kernel caps the size at the system's
        # net.core.wmem_max; a response is in the kernel, as before, once send returns.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        connection.connect(address)
        serve(connection.makefile("r", encoding="utf-8"), Responses(connection.makefile("wb")), Worker().operations())
        # the orchestrator's close waits for this end of the stream, not for the kernel's teardown of
        # this process (10-15 ms with the numerical stack loaded), which follows
        connection.shutdown(socket.SHUT_RDWR)
        status = 0
    finally:
        os._exit(status)


def main() -> None:
    protocol = protocol_output()
    threadpool_limits(limits=1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked workers are reaped by the kernel
    ops = Worker().operations()

    def fork(request: dict) -> dict:
        pid = os.fork()
        if pid == 0:
            forked(request["socket"], [protocol.fileno()])
        return {"pid": pid}

    ops["fork"] = fork
    serve(sys.stdin, Responses(protocol), ops)
    # Nothing to clean up (records keep nothing); skipping the interpreter's teardown of the loaded
    # libraries saves a few hundred milliseconds at the end of every job. The protocol's descriptor is
    # closed first: the orchestrator's close ends with it (see forked).
    protocol.flush()
    protocol.close()
    os._exit(0)


if __name__ == "__main__":
    main()
