"""Which of the scheduler's workers compute records. The orchestrator decides (pipelines/execution/
admission.ts, the one admission rule of wwref) from the identities the bridge reports here; the bridge
marks the workers it accepted (a task reaching any other worker is rescheduled before it computes) and
retires the ones it refused."""

from __future__ import annotations

import threading
import time
from typing import Any

from distributed import Client

from workflows.cluster import tasks
from workflows.protocol import Responses, success


class Admission:
    def __init__(self, client: Client, responses: Responses) -> None:
        self.client = client
        self.responses = responses
        self.lock = threading.Lock()
        self.reported: dict[str, dict[str, Any]] = {}  # address -> identity, for every worker the orchestrator was told of
        self.admitted: dict[str, dict[str, Any]] = {}  # address -> identity, of the connected admitted workers
        self.waiting: Any = None  # id of the orchestrator's pending ``joined`` request

    def identities(self, addresses: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Each worker's identity (records.hello); a worker that cannot answer is left out, and asked again later."""
        return self.client.run(tasks.identity, workers=addresses, on_error="ignore")

    def report(self, identities: dict[str, dict[str, Any]]) -> dict:
        with self.lock:
            self.reported.update(identities)
        return {"workers": identities}

    def workers(self, request: dict) -> dict:
        """``workers`` {wait_seconds}: every connected worker's identity, once at least one is connected."""
        deadline = time.monotonic() + float(request.get("wait_seconds", 60))
        while not self.client.scheduler_info(n_workers=-1)["workers"]:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no Dask worker connected to {self.client.scheduler.address} within {request.get('wait_seconds', 60)} s"
                )
            time.sleep(0.2)
        return self.report(self.identities())

    def joined(self, request: dict) -> None:
        """``joined``: answered by the monitor (watch) with the identities of the workers that connect next."""
        with self.lock:
            self.waiting = request["id"]

    def admit(self, request: dict) -> dict:
        """``admit`` {workers, retire}: the orchestrator's decision on reported workers."""
        accepted = [address for address in request["workers"] if address in self.reported]
        with self.lock:
            for address in accepted:
                self.admitted[address] = self.reported[address]
        self.client.run(tasks.admit, workers=accepted, on_error="ignore")
        if request["retire"]:
            self.client.retire_workers(workers=list(request["retire"]), close_workers=True)
        return {"admitted": sorted(self.admitted)}

    def describe(self, _: dict) -> dict:
        with self.lock:
            return {"admitted": list(self.admitted.values())}

    def watch(self) -> None:
        """Forgets admitted workers that left; reports those that connected to a pending ``joined``."""
        current = set(self.client.scheduler_info(n_workers=-1)["workers"])
        with self.lock:
            for address in list(self.admitted):
                if address not in current:
                    del self.admitted[address]
            waiting = self.waiting
            new = sorted(current - set(self.reported))
        if waiting is None or not new:
            return
        identities = self.identities(new)
        if not identities:
            return
        with self.lock:
            self.waiting = None
        self.responses.send(success(waiting, self.report(identities)))
