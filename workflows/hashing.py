"""Prediction hashes and the canonical digest (docs/records.md).

This is the worker's own hash; the orchestrator recomputes every hash in TypeScript and compares.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def digest(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prediction_sha256(rule: str, prediction: Any) -> str:
    """sha256 of a prediction by a family's hash rule (contracts/families.json): raw ndarray bytes, JSON of a dict, JSON of tolist()."""
    if rule == "json":
        return digest(prediction)
    array = np.asarray(prediction)
    if rule == "json_list":
        return digest(array.tolist())
    return digest(np.ascontiguousarray(array).tobytes())
