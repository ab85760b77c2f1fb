"""The bridge between the orchestrator and a Dask cluster (pipelines/execution/dask/dask-executor.ts).

It reads the JSON-lines protocol of workflows/protocol.py on stdin and answers on stdout, out of order:
many records are in flight on the cluster at once, each answered when its Dask future finishes.

Operations:
* ``hello``: the bridge's interpreter identity (workflows/identity.py; the orchestrator checks its
  versions and workflow code first). The bridge computes nothing and imports no SciPy, scikit-learn
  or workflow family;
* ``workers`` {wait_seconds}: the identity of every worker connected to the scheduler (waiting for one);
* ``admit`` {workers, refused}: marks the workers the orchestrator accepted; refused ones are retired
  from the cluster. A worker that joins later is admitted here when its identity fingerprint equals
  an admitted worker's, else retired (``describe`` lists the reasons);
* ``describe``: admitted workers' identities and the refusals so far;
* ``run`` / ``truth`` {family, folder, files, mask, reuse_shared_stage, timeout_seconds}: the prepared
  input's files are read here once, checked against their sha256 and scattered to the workers by
  content; the record is submitted as a task. A task running longer than its timeout is cancelled
  and its worker restarted (error type RecordTimeout); a task whose workers kept dying fails as
  WorkerCrash; a lost scheduler fails everything pending as SchedulerLost.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from distributed import Client, as_completed
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from workflows.cluster import tasks
from workflows.identity import interpreter
from workflows.protocol import failure, reported_failure, success

# How often the monitor looks at the cluster (new workers, running tasks, the scheduler link).
MONITOR_SECONDS = 1.0
# Tasks kept on the cluster per admitted worker (one computing, the next ones ready to start).
IN_FLIGHT_PER_WORKER = 3
# Records of one input grouped into one task at most, the time a task should take, and how far down
# the queue to look for records of the same input.
MAX_BATCH = 16
TASK_SECONDS = 0.25
BATCH_LOOKAHEAD = 256
# How often a record is sent again after every copy of its input was lost with its workers.
INPUT_ATTEMPTS = 5
INPUT_RETRY_SECONDS = 1.0
# A scheduler unreachable this long is lost: pending requests fail, the orchestrator stops.
SCHEDULER_LOST_SECONDS = 20.0


def fingerprint(identity: dict[str, Any]) -> dict[str, Any]:
    """What decides bits in a worker's identity: interpreter and its string hashing, packages, workflow
    code, families, C library, BLAS kernels and NumPy's enabled SIMD targets, the numerics environment.
    The CPU model and its full feature list may differ between machines that compute the same bits."""
    numerics = identity["numerics"]
    return {
        "python": identity["python"],
        "hash_randomization": identity.get("hash_randomization"),  # absent from older wwref workers
        "versions": identity["versions"],
        "code_sha256": identity["code_sha256"],
        "families": identity["families"],
        "threadpools": sorted(json.dumps(p, sort_keys=True) for p in identity["threadpools"]),
        "machine": numerics["machine"],
        "libc": numerics["libc"],
        "blas": [{k: lib[k] for k in ("package", "internal_api", "version", "architecture")} for lib in numerics["blas"]],
        "numpy_simd": {k: numerics["numpy_simd"][k] for k in ("baseline", "dispatched")},
        "environment": numerics["environment"],
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [key for key in a if a[key] != b.get(key)]


class Bridge:
    def __init__(self, client: Client, output) -> None:
        self.client = client
        self.output = output
        self.lock = threading.Lock()
        self.inputs: dict[str, dict[str, Any]] = {}  # files sha256 (json) -> {name: scattered future}
        self.admitted: dict[str, dict[str, Any]] = {}  # address -> identity
        self.refused: dict[str, str] = {}  # address -> reason
        self.fingerprints: list[dict[str, Any]] = []
        self.pending: dict[str, dict[str, Any]] = {}  # task key -> {id, future, timeout, started, worker}
        self.lost_since: float | None = None
        self.lost = False
        self.closed = False
        # Results are fetched concurrently by Dask's event loop and handed over here in batches.
        self.completed = as_completed(loop=client.loop, with_results=True, raise_errors=False)
        self.submitted = threading.Event()
        self.incoming: queue.Queue = queue.Queue()
        self.record_seconds: dict[str, float] = {}  # input key -> mean seconds of its finished records
        self.record_counts: dict[str, int] = {}
        self.wakeup = threading.Event()

    # -- responses ------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        with self.lock:
            self.output.write(data)
            self.output.flush()

    def fail(self, request_id: Any, type_name: str, message: str) -> None:
        self.send(failure(request_id, RuntimeError(message), type_name))

    # -- workers --------------------------------------------------------------------------------
    def identities(self, addresses: list[str] | None = None) -> dict[str, dict[str, Any]]:
        return self.client.run(tasks.identity, workers=addresses, on_error="ignore")

    def workers(self, request: dict) -> dict:
        deadline = time.monotonic() + float(request.get("wait_seconds", 60))
        while not self.client.scheduler_info(n_workers=-1)["workers"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Dask worker connected to {self.client.scheduler.address} within {request.get('wait_seconds', 60)} s")
            time.sleep(0.2)
        return {"workers": self.identities()}

    def admit(self, request: dict) -> dict:
        accepted = list(request["workers"])
        identities = self.identities(accepted)
        for address in accepted:
            if address in identities:
                self.admitted[address] = identities[address]
                self.fingerprints.append(fingerprint(identities[address]))
        self.client.run(tasks.admit, workers=accepted, on_error="ignore")
        self.retire(dict(request.get("refused", {})))
        return {"admitted": sorted(self.admitted)}

    def retire(self, refused: dict[str, str]) -> None:
        if not refused:
            return
        self.refused.update(refused)
        self.client.retire_workers(workers=list(refused), close_workers=True)

    def describe(self, _: dict) -> dict:
        return {"admitted": list(self.admitted.values()), "refused": self.refused}

    def watch_workers(self) -> None:
        """Admits a worker that joined later when its fingerprint is an admitted one's, else retires it."""
        current = set(self.client.scheduler_info(n_workers=-1)["workers"])
        for address in list(self.admitted):
            if address not in current:
                del self.admitted[address]
        new = sorted(current - set(self.admitted) - set(self.refused))
        if not new or not self.fingerprints:
            return
        accepted, refused = [], {}
        for address, identity in self.identities(new).items():
            mine = fingerprint(identity)
            if mine in self.fingerprints:
                accepted.append(address)
                self.admitted[address] = identity
            else:
                refused[address] = f"its identity differs from the admitted workers' in {', '.join(differences(mine, self.fingerprints[0]))}"
        if accepted:
            self.client.run(tasks.admit, workers=accepted, on_error="ignore")
        self.retire(refused)

    # -- records --------------------------------------------------------------------------------
    def scattered(self, folder: str, files: dict[str, str]) -> dict[str, Any]:
        key = json.dumps(files, sort_keys=True)
        if key not in self.inputs:
            by_hash = {}
            for name, expected in files.items():
                data = (Path(folder) / name).read_bytes()
                actual = hashlib.sha256(data).hexdigest()
                if actual != expected:
                    raise ValueError(f"prepared input {Path(folder) / name} has sha256 {actual}, not the requested {expected}")
                by_hash[f"wwref-input-{expected}"] = data
            # Keyed by content; broadcast, so that every worker holds a copy and losing one loses no input.
            futures = self.client.scatter(by_hash, broadcast=True)
            self.inputs[key] = {name: futures[f"wwref-input-{sha}"] for name, sha in files.items()}
        return self.inputs[key]

    def submit(self, request: dict, attempt: int = 1, solo: bool = False) -> None:
        """Queues a request. The submitter keeps a few tasks per admitted worker on the cluster and
        the rest here, in the orchestrator's order (largest first): Dask would otherwise assign every
        task to a worker at once, by count rather than by cost."""
        key = self.input_key(request) if request["op"] == "run" else None
        self.incoming.put({"request": request, "attempt": attempt, "solo": solo, "key": key})
        self.wakeup.set()

    def submitter(self) -> None:
        backlog: collections.deque = collections.deque()
        while not self.closed:
            while True:
                try:
                    backlog.append(self.incoming.get_nowait())
                except queue.Empty:
                    break
            if self.lost:
                self.fail_items(list(backlog), "SchedulerLost", f"the Dask scheduler {self.client.scheduler.address} has been unreachable for {SCHEDULER_LOST_SECONDS:g} s")
                backlog.clear()
            workers = max(len(self.admitted), 1)
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
            contents = self.scattered(request["folder"], request["files"])
        except Exception as error:  # a changed or missing input fails its requests only
            for item in items:
                self.send(failure(item["request"]["id"], error))
            return
        key = f"wwref-{request['op']}-{request['id']}-{uuid.uuid4().hex[:8]}"
        if request["op"] == "run":
            masks = [item["request"]["mask"] for item in items]
            future = self.client.submit(tasks.run, request["family"], request["files"], contents, masks, bool(request.get("reuse_shared_stage")), key=key, pure=False)
        else:
            future = self.client.submit(tasks.truth, request["family"], request["files"], contents, key=key, pure=False)
        timeout = float(request.get("timeout_seconds") or 0) * len(items)
        self.pending[key] = {"items": items, "future": future, "timeout": timeout, "started": None, "worker": None}
        self.completed.add(future)
        self.submitted.set()

    def collect(self) -> None:
        """Answers each request as its task finishes."""
        while not self.closed:
            try:
                batch = self.completed.next_batch(block=True)
            except StopIteration:  # nothing in flight
                self.submitted.wait(0.1)
                self.submitted.clear()
                continue
            for future, result in batch:
                self.finished(future.key, future, result)

    def learn(self, key: str, seconds: list[float]) -> None:
        """Running mean of the record time of an input, for the size of its next batches."""
        if not seconds:
            return
        count = self.record_counts.get(key, 0)
        mean = self.record_seconds.get(key, 0.0)
        self.record_seconds[key] = (mean * count + sum(seconds)) / (count + len(seconds))
        self.record_counts[key] = count + len(seconds)

    def fail_items(self, items: list[dict], type_name: str, message: str) -> None:
        for item in items:
            self.fail(item["request"]["id"], type_name, message)

    def again(self, items: list[dict], next_attempt: bool = False, delay: float = 0.0) -> None:
        """Sends requests again, one task each, so that a record that fails does so alone."""
        def resend() -> None:
            for item in items:
                self.submit(item["request"], item["attempt"] + (1 if next_attempt else 0), solo=True)
        if delay:
            threading.Timer(delay, resend).start()
        else:
            resend()

    def finished(self, key: str, future, fetched: Any) -> None:
        entry = self.pending.pop(key, None)
        self.wakeup.set()
        if entry is None:  # already answered (timeout, lost scheduler)
            return
        items = entry["items"]
        try:
            # A finished task's result was fetched by as_completed; errors and cancellations raise here.
            result = fetched if future.status == "finished" else future.result()
        except KilledWorker as error:
            if len(items) > 1:
                self.again(items)
            else:
                self.fail_items(items, "WorkerCrash", f"the workers running it died: {error}")
        except FutureCancelledError as error:
            if "lost dependencies" in str(error) and items[0]["attempt"] < INPUT_ATTEMPTS:
                # Every copy of the scattered input was lost (its workers died): send it again once
                # the restarted workers have had time to join.
                self.inputs.clear()
                self.again(items, next_attempt=True, delay=INPUT_RETRY_SECONDS * items[0]["attempt"])
            elif self.client.status != "running":
                self.fail_items(items, "SchedulerLost", f"the connection to the Dask scheduler {self.client.scheduler.address} was lost")
            else:
                self.fail_items(items, "WorkerCrash", f"the task was cancelled: {error}")
        except Exception as error:  # the task raised outside the records (e.g. its input did not verify)
            for item in items:
                self.send(failure(item["request"]["id"], error))
        else:
            outcomes = result if items[0]["request"]["op"] == "run" else [{"ok": result}]
            if items[0]["request"]["op"] == "run":
                self.learn(items[0]["key"], [o["ok"]["wall_seconds"] for o in outcomes if "ok" in o])
            for item, outcome in zip(items, outcomes):
                request_id = item["request"]["id"]
                if "error" in outcome:
                    self.send(reported_failure(request_id, *outcome["error"]))
                    continue
                try:
                    self.send(success(request_id, outcome["ok"]))
                except Exception as error:  # e.g. a NaN in the result
                    self.send(failure(request_id, error))

    def watch_tasks(self) -> None:
        """Starts each task's clock when a worker takes it; stops tasks over their timeout. A batch
        over its time is sent again record by record, so that the slow record meets its own timeout."""
        now = time.monotonic()
        processing = self.client.processing()
        for worker, keys in processing.items():
            for key in keys:
                entry = self.pending.get(key)
                if entry is not None and entry["worker"] != worker:
                    entry["worker"], entry["started"] = worker, now
        for key, entry in list(self.pending.items()):
            if entry["timeout"] and entry["started"] is not None and now - entry["started"] > entry["timeout"]:
                if self.pending.pop(key, None) is None:
                    continue
                entry["future"].cancel()
                self.client.restart_workers([entry["worker"]], raise_for_error=False)
                if len(entry["items"]) > 1:
                    self.again(entry["items"])
                else:
                    per_record = entry["timeout"]
                    self.fail_items(entry["items"], "RecordTimeout", f"exceeded the {per_record:g} s timeout; Dask worker {entry['worker']} was restarted")

    def watch_scheduler(self) -> None:
        if self.client.status == "running":
            self.lost_since = None
            return
        self.lost_since = self.lost_since or time.monotonic()
        if time.monotonic() - self.lost_since > SCHEDULER_LOST_SECONDS:
            for key, entry in list(self.pending.items()):
                if self.pending.pop(key, None) is not None:
                    self.fail_items(entry["items"], "SchedulerLost", f"the Dask scheduler {self.client.scheduler.address} has been unreachable for {SCHEDULER_LOST_SECONDS:g} s")
            self.lost = True  # the submitter fails what never reached the cluster

    def monitor(self) -> None:
        while not self.closed:
            self.attempt(self.watch_scheduler)
            if self.lost_since is None:
                self.attempt(self.watch_workers)
                self.attempt(self.watch_tasks)
            time.sleep(MONITOR_SECONDS)

    @staticmethod
    def attempt(watch) -> None:
        """One watch of the monitor, on its own: one that fails (a worker's odd identity, a lost
        link) must not stop the others, the task timeouts above all. The next round retries."""
        try:
            watch()
        except Exception as error:
            print(f"bridge monitor: {watch.__name__}: {type(error).__name__}: {error}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scheduler", required=True, help="address of the Dask scheduler, e.g. tcp://127.0.0.1:8786")
    args = parser.parse_args()
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    client = Client(args.scheduler, timeout=30, set_as_default=False)
    bridge = Bridge(client, protocol)
    immediate = {"hello": lambda _: interpreter(), "workers": bridge.workers, "admit": bridge.admit, "describe": bridge.describe}
    deferred = {"run": bridge.submit, "truth": bridge.submit}
    threading.Thread(target=bridge.monitor, daemon=True).start()
    threading.Thread(target=bridge.collect, daemon=True).start()
    threading.Thread(target=bridge.submitter, daemon=True).start()
    try:
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
                if op in deferred:
                    deferred[op](request)
                elif op in immediate:
                    bridge.send(success(request_id, immediate[op](request)))
                else:
                    raise ValueError(f"unknown operation {op!r}")
            except Exception as error:
                bridge.send(failure(request_id, error))
    finally:
        bridge.closed = True
        client.close()


if __name__ == "__main__":
    main()
