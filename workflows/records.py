"""One record on a decoded prepared input, and the runtime identity of the process computing it.
Both the local worker (workflows/worker.py) and a Dask worker (workflows/cluster/tasks.py) compute
records through :func:`run_record`, so a record is the same computation whichever executor runs it."""

from __future__ import annotations

import os
import platform
import time
import warnings
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info

from workflows import identity, numerics
from workflows.families import FAMILIES, REGISTRY
from workflows.hashing import prediction_sha256
from workflows.protocol import encode, to_json_value


def hello() -> dict[str, Any]:
    """The interpreter's identity (workflows/identity.py), thread pools, numerical state, host and the
    family registry."""
    pools = [{"api": p.get("internal_api"), "num_threads": p.get("num_threads")} for p in threadpool_info()]
    return {
        **identity.interpreter(),
        "pid": os.getpid(),
        "host": platform.node(),
        "threadpools": pools,
        "numerics": numerics.report(),
        "families": REGISTRY,
    }


def run_record(family_name: str, data: dict[str, Any], mask: str, stage: Any = None) -> dict[str, Any]:
    """Predict and evaluate one configuration. ``stage`` is the family's SharedStage for this input
    when the caller reuses it across masks (rebuild's option), else None: nothing is kept."""
    family = FAMILIES[family_name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        prediction = family.predict(data, mask) if stage is None else family.predict(data, mask, cache=stage)
        middle = time.perf_counter()
        result = family.evaluate(data, prediction)
        end = time.perf_counter()
    return {
        "prediction": encode(prediction if isinstance(prediction, np.ndarray) else to_json_value(prediction)),
        "prediction_sha256": prediction_sha256(REGISTRY[family_name]["hash_rule"], prediction),
        "native_metric": result["native_metric"],
        "native_value": float(result["native_value"]),
        "utility": float(result["utility"]),
        "normalization_scale": None if result.get("normalization_scale") is None else float(result["normalization_scale"]),
        "extras": to_json_value(result.get("extras", {})),
        "warnings": [{"category": w.category.__name__, "message": str(w.message)} for w in caught],
        "prediction_wall_seconds": middle - start,
        "metric_wall_seconds": end - middle,
        "wall_seconds": end - start,
    }


def truth(family_name: str, data: dict[str, Any]) -> dict[str, Any]:
    """The held-out values the independent TypeScript metric needs."""
    return {"truth": {key: encode(value) for key, value in FAMILIES[family_name].truth(data).items()}}
