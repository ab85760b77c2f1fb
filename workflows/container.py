"""Prepared-input container (docs/recipes.md).

A prepared input is a folder with two files:
* ``arrays.npz``: numpy ``savez_compressed`` with keyword arrays in a fixed key order (the order of
  the list given to :func:`write_prepared`); identical arrays give identical bytes;
* ``metadata.json.gz``: gzip (mtime 0, level 9) of compact JSON.

Both files are written atomically (temporary file, then rename), so a reader never sees half a file.
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ARRAYS_FILE = "arrays.npz"
METADATA_FILE = "metadata.json.gz"


def metadata_bytes(metadata: dict[str, Any]) -> bytes:
    text = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return gzip.compress(text.encode("utf-8"), mtime=0)


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_prepared(folder: str | os.PathLike, arrays: Sequence[tuple[str, np.ndarray]], metadata: dict[str, Any]) -> None:
    folder = Path(folder)
    if arrays:
        _atomic_write(folder / ARRAYS_FILE, lambda h: np.savez_compressed(h, **dict(arrays)))
    else:
        _atomic_write(folder / ARRAYS_FILE, lambda h: np.savez(h))
    payload = metadata_bytes(metadata)
    _atomic_write(folder / METADATA_FILE, lambda h: h.write(payload))


def read_prepared(folder: str | os.PathLike) -> dict[str, Any]:
    """The metadata dict, then every npz entry added under its key (pickle disallowed), as the replay does."""
    folder = Path(folder)
    for name in (ARRAYS_FILE, METADATA_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"prepared input is missing {folder / name}")
    with gzip.open(folder / METADATA_FILE, "rb") as handle:
        data = json.loads(handle.read().decode("utf-8"))
    with np.load(folder / ARRAYS_FILE, allow_pickle=False) as npz:
        for key in npz.files:
            data[key] = npz[key]
    return data
