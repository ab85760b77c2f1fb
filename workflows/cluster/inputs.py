"""Prepared inputs on the cluster: each one's files are read here once, checked against their sha256 and
scattered to every worker under their content hash (no shared filesystem; the workers check them again)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from distributed import Client


class Inputs:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.scattered: dict[str, dict[str, Any]] = {}  # files sha256 (json) -> {name: scattered future}

    def futures(self, folder: str, files: dict[str, str]) -> dict[str, Any]:
        key = json.dumps(files, sort_keys=True)
        if key not in self.scattered:
            by_hash = {}
            for name, expected in files.items():
                data = (Path(folder) / name).read_bytes()
                actual = hashlib.sha256(data).hexdigest()
                if actual != expected:
                    raise ValueError(f"prepared input {Path(folder) / name} has sha256 {actual}, not the requested {expected}")
                by_hash[f"wwref-input-{expected}"] = data
            # Keyed by content; broadcast, so that every worker holds a copy and losing one loses no input.
            futures = self.client.scatter(by_hash, broadcast=True)
            self.scattered[key] = {name: futures[f"wwref-input-{sha}"] for name, sha in files.items()}
        return self.scattered[key]

    def forget(self) -> None:
        """After every copy of an input was lost with its workers: scattered again on next use."""
        self.scattered.clear()
