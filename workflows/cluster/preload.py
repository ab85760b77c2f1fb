"""Dask worker preload of `wwref worker` (``dask worker --preload workflows.cluster.preload``): one
computation thread for every BLAS/OpenMP pool and the workflow libraries imported before the worker
connects, so that its identity (workflows.records.hello) is complete when the bridge asks for it. The
thread variables and the numerical profile are set in the environment by the orchestrator."""

from __future__ import annotations

from threadpoolctl import threadpool_limits

import workflows.families  # noqa: F401  (imports the libraries every record uses)


def dask_setup(worker) -> None:
    threadpool_limits(limits=1)
    worker.wwref_admitted = False
