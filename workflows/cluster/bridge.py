"""The bridge between the orchestrator and a Dask cluster (pipelines/execution/dask/dask-executor.ts).

It serves the JSON-lines protocol of workflows/protocol.py on stdin and stdout, records out of order:
many are in flight on the cluster at once, each answered when its Dask task finishes. The bridge
computes nothing and imports no SciPy, scikit-learn or workflow family.

Operations, in the order the orchestrator sends them:
* ``hello``: the bridge's interpreter identity (workflows/identity.py; the orchestrator checks its
  versions and workflow code);
* ``connect``: connects to the scheduler, or fails as SchedulerUnreachable saying what answers at its
  address instead (workflows/cluster/connection.py); the operations below exist from then on;
* ``workers`` {wait_seconds}, ``joined``, ``admit`` {workers, retire}, ``describe``: the identity of every
  worker connected (waiting for one), of those that connect later (answered when some do), the
  orchestrator's admission of them, the admitted ones' identities (workflows/cluster/admission.py);
* ``run`` / ``truth`` {family, folder, files, mask, reuse_shared_stage, timeout_seconds}: records, queued
  and grouped into tasks (workflows/cluster/submission.py) and answered as the tasks finish
  (workflows/cluster/results.py); the monitor enforces timeouts and watches the scheduler link
  (workflows/cluster/monitor.py).
"""

from __future__ import annotations

import argparse
import sys
import threading

from workflows.cluster.admission import Admission
from workflows.cluster.connection import connect
from workflows.cluster.inputs import Inputs
from workflows.cluster.monitor import Monitor
from workflows.cluster.results import Results
from workflows.cluster.submission import Submission
from workflows.identity import interpreter
from workflows.protocol import Responses, protocol_output, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scheduler", required=True, help="address of the Dask scheduler, e.g. tcp://127.0.0.1:8786")
    args = parser.parse_args()
    responses = Responses(protocol_output())
    stop = threading.Event()
    clients = []
    ops = {"hello": lambda _: interpreter()}
    later = {}

    def connected(_: dict) -> dict:
        if clients:
            raise ValueError("the bridge is connected already")
        client = connect(args.scheduler)
        clients.append(client)
        admission = Admission(client, responses)
        submission = Submission(client, responses, admission, Inputs(client), stop)
        ops.update(workers=admission.workers, admit=admission.admit, describe=admission.describe)
        later.update(joined=admission.joined, run=submission.submit, truth=submission.submit)
        for loop in (Monitor(submission, admission).run, Results(submission).run, submission.run):
            threading.Thread(target=loop, daemon=True).start()
        return {"scheduler": client.scheduler.address}

    ops["connect"] = connected
    try:
        serve(sys.stdin, responses, ops, later)
    finally:
        stop.set()
        for client in clients:
            client.close()


if __name__ == "__main__":
    main()
