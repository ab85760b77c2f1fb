"""Dask nanny preload of `wwref worker` (``dask worker --preload-nanny workflows.cluster.nanny``): the
worker processes a nanny spawns start with the environment the orchestrator gave the nanny. Dask's
nanny would otherwise set two variables of its own before spawning them:

* ``MALLOC_TRIM_THRESHOLD_=65536``: glibc then turns off its adaptive mmap threshold and maps and
  unmaps every large array afresh (page faults on every temporary); records on large NumPy arrays
  (beat detection, image restoration) take about 1.5 times as long;
* ``PYTHONHASHSEED``: a seed of its own replaces our ``0``, so string hashing, and with it the order
  of sets of strings, would differ from local workers (admission.ts refuses such a worker).

(Written for Dask's default ``spawn`` start method, where the worker process starts from the
environment the nanny sets; checked by test/execution/dask-executor.test.ts.)"""

from __future__ import annotations

import os

# Variables the nanny sets in its worker processes' environment that wwref decides itself: the
# nanny's own value (from the orchestrator or the job script) is kept, else the variable is unset.
OWNED = ("MALLOC_TRIM_THRESHOLD_", "PYTHONHASHSEED")


def dask_setup(nanny) -> None:
    for environment in (nanny.pre_spawn_env, nanny.env):
        for name in OWNED:
            if name in os.environ:
                environment[name] = os.environ[name]
            else:
                environment.pop(name, None)
