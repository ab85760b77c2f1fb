"""Prediction hashes and the canonical digest (spec/records.md sections 1 and 2).

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


# Which rule each family uses: raw ndarray bytes, JSON of the dict, or JSON of ndarray.tolist().
HASH_RULES = {
    "classification": "raw_bytes",
    "regression": "raw_bytes",
    "clustering": "raw_bytes",
    "forecasting": "raw_bytes",
    "image_restoration": "raw_bytes",
    "retrieval": "json",
    "beat_detection": "json_list",
    "graph_link_prediction": "json_list",
}


def prediction_sha256(family: str, prediction: Any) -> str:
    rule = HASH_RULES[family]
    if rule == "json":
        return digest(prediction)
    array = np.asarray(prediction)
    if rule == "json_list":
        return digest(array.tolist())
    return digest(np.ascontiguousarray(array).tobytes())
