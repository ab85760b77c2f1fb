"""Answers to the records in flight, each when its Dask task finishes (out of order): the outcomes of its
records, or its failure typed for the orchestrator. A batch whose worker died is sent again record by
record, so that a record that crashes its worker fails alone (WorkerCrash); a task whose scattered input
was lost with its workers is sent again once they have restarted; a lost scheduler fails it as SchedulerLost."""

from __future__ import annotations

from typing import Any

from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from workflows.cluster.submission import Submission
from workflows.protocol import failure, reported_failure, success

# How often a record is sent again after every copy of its input was lost with its workers.
INPUT_ATTEMPTS = 5
INPUT_RETRY_SECONDS = 1.0


class Results:
    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self.client = submission.client
        self.responses = submission.responses

    def run(self) -> None:
        """The collector thread."""
        flight = self.submission
        while not flight.stop.is_set():
            try:
                batch = flight.completed.next_batch(block=True)
            except StopIteration:  # nothing in flight
                flight.submitted.wait(0.1)
                flight.submitted.clear()
                continue
            for future, result in batch:
                self.finished(future.key, future, result)

    def finished(self, key: str, future, fetched: Any) -> None:
        flight = self.submission
        entry = flight.pending.pop(key, None)
        flight.wakeup.set()
        if entry is None:  # already answered (timeout, lost scheduler)
            return
        items = entry["items"]
        try:
            # A finished task's result was fetched by as_completed; errors and cancellations raise here.
            result = fetched if future.status == "finished" else future.result()
        except KilledWorker as error:
            if len(items) > 1:
                flight.again(items)
            else:
                flight.fail_items(items, "WorkerCrash", f"the workers running it died: {error}")
        except FutureCancelledError as error:
            if "lost dependencies" in str(error) and items[0]["attempt"] < INPUT_ATTEMPTS:
                # Every copy of the scattered input was lost (its workers died): send it again once
                # the restarted workers have had time to join.
                flight.inputs.forget()
                flight.again(items, next_attempt=True, delay=INPUT_RETRY_SECONDS * items[0]["attempt"])
            elif self.client.status != "running":
                flight.fail_items(items, "SchedulerLost", f"the connection to the Dask scheduler {self.client.scheduler.address} was lost")
            else:
                flight.fail_items(items, "WorkerCrash", f"the task was cancelled: {error}")
        except Exception as error:  # the task raised outside the records (e.g. its input did not verify)
            for item in items:
                self.responses.send(failure(item["request"]["id"], error))
        else:
            outcomes = result if items[0]["request"]["op"] == "run" else [{"ok": result}]
            if items[0]["request"]["op"] == "run":
                flight.learn(items[0]["key"], [o["ok"]["wall_seconds"] for o in outcomes if "ok" in o])
            for item, outcome in zip(items, outcomes, strict=False):
                request_id = item["request"]["id"]
                if "error" in outcome:
                    self.responses.send(reported_failure(request_id, *outcome["error"]))
                    continue
                try:
                    self.responses.send(success(request_id, outcome["ok"]))
                except Exception as error:  # e.g. a NaN in the result
                    self.responses.send(failure(request_id, error))
