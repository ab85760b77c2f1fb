"""The bridge's look at the cluster, every MONITOR_SECONDS: the scheduler link (a scheduler unreachable
for SCHEDULER_LOST_SECONDS fails every pending request as SchedulerLost, and the orchestrator stops), the
running tasks (a task over its timeout is cancelled and its worker restarted: RecordTimeout) and the
workers that connect while the job runs (reported to the orchestrator for admission)."""

from __future__ import annotations

import sys
import time

from workflows.cluster.admission import Admission
from workflows.cluster.submission import Submission

MONITOR_SECONDS = 1.0
SCHEDULER_LOST_SECONDS = 20.0


class Monitor:
    def __init__(self, submission: Submission, admission: Admission) -> None:
        self.submission = submission
        self.admission = admission
        self.client = submission.client
        self.lost_since: float | None = None

    def run(self) -> None:
        """The monitor thread."""
        while not self.submission.stop.is_set():
            self.attempt(self.watch_scheduler)
            if self.lost_since is None:
                self.attempt(self.admission.watch)
                self.attempt(self.watch_tasks)
            self.submission.stop.wait(MONITOR_SECONDS)

    @staticmethod
    def attempt(watch) -> None:
        """One watch, on its own: one that fails (a worker's odd identity, a lost link) must not stop
        the others, the task timeouts above all. The next round retries."""
        try:
            watch()
        except Exception as error:
            print(f"bridge monitor: {watch.__name__}: {type(error).__name__}: {error}", file=sys.stderr)

    def watch_tasks(self) -> None:
        """Starts each task's clock when a worker takes it; stops tasks over their timeout. A batch
        over its time is sent again record by record, so that the slow record meets its own timeout."""
        flight = self.submission
        now = time.monotonic()
        processing = self.client.processing()
        for worker, keys in processing.items():
            for key in keys:
                entry = flight.pending.get(key)
                if entry is not None and entry["worker"] != worker:
                    entry["worker"], entry["started"] = worker, now
        for key, entry in list(flight.pending.items()):
            if entry["timeout"] and entry["started"] is not None and now - entry["started"] > entry["timeout"]:
                if flight.pending.pop(key, None) is None:
                    continue
                entry["future"].cancel()
                self.client.restart_workers([entry["worker"]], raise_for_error=False)
                if len(entry["items"]) > 1:
                    flight.again(entry["items"])
                else:
                    per_record = entry["timeout"]
                    flight.fail_items(
                        entry["items"],
                        "RecordTimeout",
                        f"exceeded the {per_record:g} s timeout; Dask worker {entry['worker']} was restarted",
                    )

    def watch_scheduler(self) -> None:
        if self.client.status == "running":
            self.lost_since = None
            return
        self.lost_since = self.lost_since or time.monotonic()
        if time.monotonic() - self.lost_since > SCHEDULER_LOST_SECONDS:
            flight = self.submission
            message = f"the Dask scheduler {self.client.scheduler.address} has been unreachable for {SCHEDULER_LOST_SECONDS:g} s"
            for key, entry in list(flight.pending.items()):
                if flight.pending.pop(key, None) is not None:
                    flight.fail_items(entry["items"], "SchedulerLost", message)
            flight.lost = message  # the submitter fails what never reached the cluster
