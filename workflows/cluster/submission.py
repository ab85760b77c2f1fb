"""Records on their way to the cluster: the ``run`` and ``truth`` requests queued in the bridge, grouped
into Dask tasks and submitted a few per admitted worker at a time, and the tasks in flight (answered by
workflows/cluster/results.py, watched by workflows/cluster/monitor.py)."""

from __future__ import annotations

import collections
import json
import queue
import threading
import uuid
from typing import Any

from distributed import Client, as_completed

from workflows.cluster import tasks
from workflows.cluster.admission import Admission
from workflows.cluster.inputs import Inputs
from workflows.protocol import Responses, failure

# Tasks kept on the cluster per admitted worker (one computing, the next ones ready to start).
IN_FLIGHT_PER_WORKER = 3
# Records of one input grouped into one task at most, the time a task should take, and how far down
# the queue to look for records of the same input.
MAX_BATCH = 16
TASK_SECONDS = 0.25
BATCH_LOOKAHEAD = 256


class Submission:
    def __init__(self, client: Client, responses: Responses, admission: Admission, inputs: Inputs, stop: threading.Event) -> None:
        self.client = client
        self.responses = responses
        self.admission = admission
        self.inputs = inputs
        self.stop = stop
        self.pending: dict[str, dict[str, Any]] = {}  # task key -> {items, future, timeout, started, worker}
        self.lost: str | None = None  # why the scheduler is lost (set by the monitor): what is queued fails
        # Results are fetched concurrently by Dask's event loop and handed over in batches (results.py).
        self.completed = as_completed(loop=client.loop, with_results=True, raise_errors=False)
        self.submitted = threading.Event()
        self.incoming: queue.Queue = queue.Queue()
        self.record_seconds: dict[str, float] = {}  # input key -> mean seconds of its finished records
        self.record_counts: dict[str, int] = {}
        self.wakeup = threading.Event()

    def fail(self, request_id: Any, type_name: str, message: str) -> None:
        self.responses.send(failure(request_id, RuntimeError(message), type_name))

    def fail_items(self, items: list[dict], type_name: str, message: str) -> None:
        for item in items:
            self.fail(item["request"]["id"], type_name, message)

    def submit(self, request: dict, attempt: int = 1, solo: bool = False) -> None:
        """Queues a request (``run`` / ``truth``). The submitter keeps a few tasks per admitted worker on
        the cluster and the rest here, in the orchestrator's order (largest first): Dask would otherwise
        assign every task to a worker at once, by count rather than by cost."""
        key = self.input_key(request) if request["op"] == "run" else None
        self.incoming.put({"request": request, "attempt": attempt, "solo": solo, "key": key})
        self.wakeup.set()

    def again(self, items: list[dict], next_attempt: bool = False, delay: float = 0.0) -> None:
        """Sends requests again, one task each, so that a record that fails does so alone."""

        def resend() -> None:
            for item in items:
                self.submit(item["request"], item["attempt"] + (1 if next_attempt else 0), solo=True)

        if delay:
            threading.Timer(delay, resend).start()
        else:
            resend()

    def run(self) -> None:
        """The submitter thread."""
        backlog: collections.deque = collections.deque()
        while not self.stop.is_set():
            while True:
                try:
                    backlog.append(self.incoming.get_nowait())
                except queue.Empty:
                    break
            if self.lost:
                self.fail_items(list(backlog), "SchedulerLost", self.lost)
                backlog.clear()
            workers = max(len(self.admission.admitted), 1)
            room = IN_FLIGHT_PER_WORKER * workers - len(self.pending)
            submitted = False
            while room > 0 and backlog:
                self.submit_task(self.take_task(backlog, workers))
                room -= 1
                submitted = True
            if not submitted:
                self.wakeup.wait(0.05)
                self.wakeup.clear()

    @staticmethod
    def input_key(request: dict) -> str:
        return json.dumps([request["family"], request["files"], bool(request.get("reuse_shared_stage"))], sort_keys=True)

    def take_task(self, backlog: collections.deque, workers: int) -> list[dict]:
        """The next task's items: the first queued request and, for a record, the records queued
        behind it on the same input, as many as fit in about TASK_SECONDS by the records of that
        input seen so far (one while none has finished), and never more than a quarter per worker
        of all that is queued, so that the last tasks of the job stay small and the workers finish
        together (shrinking by what is queued for this input alone would send the records of an
        input with few masks one task each, paying a round trip per record)."""
        first = backlog.popleft()
        items = [first]
        request = first["request"]
        if request["op"] != "run" or first["solo"]:
            return items
        key = first["key"]
        same = [item for item in list(backlog)[:BATCH_LOOKAHEAD] if item["key"] == key and not item["solo"]]
        seconds = self.record_seconds.get(key)
        by_time = 1 if seconds is None else int(TASK_SECONDS / max(seconds, 1e-6))
        size = max(1, min(MAX_BATCH, by_time, (len(backlog) + 1) // (2 * workers)))
        for item in same[: size - 1]:
            backlog.remove(item)
            items.append(item)
        return items

    def submit_task(self, items: list[dict]) -> None:
        request = items[0]["request"]
        try:
            contents = self.inputs.futures(request["folder"], request["files"])
        except Exception as error:  # a changed or missing input fails its requests only
            for item in items:
                self.responses.send(failure(item["request"]["id"], error))
            return
        key = f"wwref-{request['op']}-{request['id']}-{uuid.uuid4().hex[:8]}"
        if request["op"] == "run":
            masks = [item["request"]["mask"] for item in items]
            future = self.client.submit(
                tasks.run,
                request["family"],
                request["files"],
                contents,
                masks,
                bool(request.get("reuse_shared_stage")),
                key=key,
                pure=False,
            )
        else:
            future = self.client.submit(tasks.truth, request["family"], request["files"], contents, key=key, pure=False)
        timeout = float(request.get("timeout_seconds") or 0) * len(items)
        self.pending[key] = {"items": items, "future": future, "timeout": timeout, "started": None, "worker": None}
        self.completed.add(future)
        self.submitted.set()

    def learn(self, key: str, seconds: list[float]) -> None:
        """Running mean of the record time of an input, for the size of its next batches."""
        if not seconds:
            return
        count = self.record_counts.get(key, 0)
        mean = self.record_seconds.get(key, 0.0)
        self.record_seconds[key] = (mean * count + sum(seconds)) / (count + len(seconds))
        self.record_counts[key] = count + len(seconds)
