"""The part of a process's runtime identity that needs none of the libraries the families compute with:
interpreter, string hashing, bit-deciding package versions and the workflow code it loaded. The Dask bridge, which
computes nothing, reports only this; workers report it inside their full hello (workflows/records.py)."""

from __future__ import annotations

import functools
import os
import platform
import sys
from importlib import metadata as importlib_metadata
from typing import Any

from workflows.contracts import ROOT, load
from workflows.hashing import digest


def bit_deciding_packages() -> list[str]:
    """The packages marked "decides bits" in workflows/requirements.txt (contracts/identity.json), in file order."""
    rule = load("identity")["bit_deciding"]
    with open(os.path.join(ROOT, rule["requirements"]), encoding="utf-8") as pins:
        return [line.split("==")[0].strip().lower() for line in pins if "==" in line and rule["mark"] in line]


@functools.cache
def loaded_versions() -> dict[str, str]:
    """The versions of the bit-deciding packages this process image imported: read once, so a fork
    reports its template's (the code it runs), even if the installation changed since."""
    return {name: importlib_metadata.version(name) for name in bit_deciding_packages()}


def code_files() -> dict[str, str]:
    """{path relative to the repository: sha256} of the workflow code and the contracts it reads
    (contracts/identity.json), as the orchestrator lists them (pipelines/execution/identity.ts)."""
    rule = load("identity")["code"]
    files = {}
    for covered in rule["folders"]:
        for folder, subfolders, names in os.walk(os.path.join(ROOT, covered["folder"])):
            subfolders[:] = [d for d in subfolders if covered["subfolders"] and d not in rule["skipped_folders"]]
            for name in names:
                if name.endswith(covered["suffix"]):
                    path = os.path.join(folder, name)
                    with open(path, "rb") as handle:
                        files[os.path.relpath(path, ROOT).replace(os.sep, "/")] = digest(handle.read())
    return files


@functools.cache
def code_sha256() -> str:
    """digest of code_files(): the code this process image loaded."""
    return digest(code_files())


def interpreter() -> dict[str, Any]:
    """Python version, string hashing (``hash_randomization`` is False when the process started with
    PYTHONHASHSEED=0, so sets of strings iterate in one order in every process of the same CPython),
    versions, code digest."""
    return {
        "python": platform.python_version(),
        "hash_randomization": bool(sys.flags.hash_randomization),
        "versions": loaded_versions(),
        "code_sha256": code_sha256(),
    }
