"""Prediction hashes and the canonical digest (docs/records.md).

This is the worker's own hash; the orchestrator recomputes every hash in TypeScript and compares.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def canonical_json(value: Any) -> str:
    """The canonical JSON of docs/records.md (canonicalJson of pipelines/core/hashing.ts; shared vectors in
    contracts/vectors/digest.json)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    """sha256 of bytes as they are, else of the UTF-8 of their canonical JSON."""
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def prediction_sha256(rule: str, prediction: Any) -> str:
    """sha256 of a prediction by a family's hash rule (contracts/families.json): raw ndarray bytes, JSON of a dict, JSON of tolist()."""
    if rule == "json":
        return digest(prediction)
    array = np.asarray(prediction)
    if rule == "json_list":
        return digest(array.tolist())
    # the contiguous array's buffer is its C-order bytes: hashed where they are, not copied first
    return hashlib.sha256(np.ascontiguousarray(array)).hexdigest()
