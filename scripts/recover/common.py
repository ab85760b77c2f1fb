"""Shared helpers for the recovery searches (research tools, not product runtime).

Reads only /work/shared (read-only inputs, override with WWREF_SHARED). Writes nothing into the
repository; caches and optional outputs go to /tmp.
"""

import gzip
import hashlib
import io
import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SHARED = os.environ.get("WWREF_SHARED", os.path.join(ROOT, "..", "shared"))

# The scripts run from this folder; the catalog's canonical digest (docs/records.md) is the workers' own.
sys.path.insert(0, ROOT)
from workflows.hashing import digest  # noqa: E402,F401


def load_json(rel):
    with open(os.path.join(SHARED, rel)) as fh:
        return json.load(fh)


def published_sha(key):
    return load_json("published/prepared_sha256.json")["files_sha256"][key]


def conditions():
    return load_json("published/conditions.json")["conditions"]


def sources():
    return load_json("published/sources.json")["sources"]


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def npz_bytes(arrays, compressed=True):
    """arrays: list of (key, ndarray) in order -> bytes of savez(_compressed)."""
    buf = io.BytesIO()
    kw = dict(arrays)
    assert list(kw) == [k for k, _ in arrays]
    (np.savez_compressed if compressed else np.savez)(buf, **kw)
    return buf.getvalue()


def gz_json_bytes(obj, ensure_ascii=True, sort_keys=False):
    txt = json.dumps(obj, separators=(",", ":"), ensure_ascii=ensure_ascii, sort_keys=sort_keys)
    return gzip.compress(txt.encode("utf-8"), mtime=0)
