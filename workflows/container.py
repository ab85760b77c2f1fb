"""Prepared-input container (docs/recipes.md).

A prepared input is a folder with two files:
* ``arrays.npz``: numpy ``savez_compressed`` with keyword arrays in a fixed key order (the order of
  the list given to :func:`write_prepared`); identical arrays give identical bytes;
* ``metadata.json.gz``: gzip (mtime 0, level 9) of compact JSON.

Both files are written atomically (temporary file, then rename), so a reader never sees half a file.
Workers load an input with :func:`load_prepared`: each file's bytes are checked against the sha256
the orchestrator names, and the decoded input is frozen (read-only arrays, immutable JSON values), so
the records computed from one decoded copy cannot pass anything to each other through it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def _decode(metadata: bytes, arrays: bytes) -> dict[str, Any]:
    """The metadata dict, then every npz entry added under its key (pickle disallowed)."""
    data = json.loads(gzip.decompress(metadata).decode("utf-8"))
    with np.load(io.BytesIO(arrays), allow_pickle=False) as npz:
        for key in npz.files:
            data[key] = npz[key]
    return data


def _file_bytes(folder: Path, name: str) -> bytes:
    path = folder / name
    if not path.is_file():
        raise FileNotFoundError(f"prepared input is missing {path}")
    return path.read_bytes()


class FrozenDict(dict):
    """A dict that refuses every change; still a dict for json, isinstance and iteration."""

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise TypeError("a prepared input is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        # Pickled (Dask sends results between processes) and rebuilt through dict.__init__, still frozen.
        return (FrozenDict, (dict(self),))


def freeze(value: Any) -> Any:
    """Read-only arrays; JSON lists as tuples and objects as FrozenDict, recursively."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value
    if isinstance(value, dict):
        return FrozenDict((key, freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(freeze(item) for item in value)
    return value


def load_prepared_bytes(contents: dict[str, bytes], sha256: dict[str, str], where: str = "") -> FrozenDict:
    """A prepared input from its files' bytes, after checking them against ``sha256`` (file name -> hex
    digest, naming exactly the container's two files), decoded once and frozen."""
    if sorted(sha256) != sorted((ARRAYS_FILE, METADATA_FILE)) or sorted(contents) != sorted(sha256):
        raise ValueError(f"a prepared input is named by the sha256 of {ARRAYS_FILE} and {METADATA_FILE}, not of {sorted(sha256)}")
    for name, expected in sha256.items():
        actual = hashlib.sha256(contents[name]).hexdigest()
        if actual != expected:
            raise ValueError(f"prepared input {where}{name} has sha256 {actual}, not the requested {expected}")
    return freeze(_decode(contents[METADATA_FILE], contents[ARRAYS_FILE]))


def load_prepared(folder: str | os.PathLike, sha256: dict[str, str]) -> FrozenDict:
    """The input in ``folder``, checked against ``sha256`` and frozen (:func:`load_prepared_bytes`)."""
    folder = Path(folder)
    if sorted(sha256) != sorted((ARRAYS_FILE, METADATA_FILE)):
        raise ValueError(f"a prepared input is named by the sha256 of {ARRAYS_FILE} and {METADATA_FILE}, not of {sorted(sha256)}")
    return load_prepared_bytes({name: _file_bytes(folder, name) for name in sha256}, sha256, f"{folder}{os.sep}")
