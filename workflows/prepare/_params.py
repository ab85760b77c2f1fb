"""Validation of recipe parameters (mirrors the zod schemas in pipelines/catalog/recipes.ts).

Every problem is a ValueError that names the parameter, e.g. ``tabular: params.split.seed: expected an
integer``. Unknown keys are rejected, as the strict zod objects do.
"""
from __future__ import annotations

from typing import Any, Iterable

_MISSING = object()


def path_name_problem(name: Any, allow_subfolders: bool) -> str | None:
    """Why ``name`` cannot be used as a file name (or, with ``allow_subfolders``, a '/'-separated
    relative path) inside a folder, or None. Mirrors SAFE_FILE_NAME and SAFE_RELATIVE_PATH of
    pipelines/core/containment.ts: no absolute path, no '..' or '.', no backslash, NUL or empty name."""
    if not isinstance(name, str) or not name:
        return "expected a non-empty string"
    if "\\" in name or "\0" in name:
        return f"{name!r} holds a backslash or NUL"
    if name.startswith("/"):
        return f"{name!r} is an absolute path"
    parts = name.split("/")
    if not allow_subfolders and len(parts) > 1:
        return f"{name!r} holds a path separator; expected a plain file name"
    if any(part in ("", ".", "..") for part in parts):
        return f"{name!r} climbs out of its folder or has an empty name ('..', '.', '//')"
    if any(len(part) > 255 for part in parts):
        return f"{name!r} has a name longer than 255 characters"
    return None


class Params:
    """Typed access to one params object; ``close()`` rejects keys nobody asked for."""

    def __init__(self, recipe: str, values: Any, path: str = "params") -> None:
        self.recipe, self.path = recipe, path
        if not isinstance(values, dict):
            raise self.error(path, "expected an object")
        self.values = values
        self.seen: set[str] = set()

    def error(self, where: str, message: str) -> ValueError:
        return ValueError(f"{self.recipe}: {where}: {message}")

    def _get(self, key: str, default: Any) -> Any:
        self.seen.add(key)
        if key in self.values:
            return self.values[key]
        if default is _MISSING:
            raise self.error(f"{self.path}.{key}", "required parameter is missing")
        return default

    def str(self, key: str, default: Any = _MISSING, choices: Iterable[str] | None = None) -> Any:
        value = self._get(key, default)
        if value is None and default is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(f"{self.path}.{key}", "expected a non-empty string")
        if choices is not None and value not in choices:
            raise self.error(f"{self.path}.{key}", f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def int(self, key: str, default: Any = _MISSING, minimum: int | None = None) -> Any:
        value = self._get(key, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{self.path}.{key}", "expected an integer")
        if minimum is not None and value < minimum:
            raise self.error(f"{self.path}.{key}", f"expected an integer >= {minimum}")
        return value

    def number(self, key: str, default: Any = _MISSING, low: float | None = None, high: float | None = None) -> Any:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{self.path}.{key}", "expected a number")
        if low is not None and value <= low:
            raise self.error(f"{self.path}.{key}", f"expected a number > {low}")
        if high is not None and value >= high:
            raise self.error(f"{self.path}.{key}", f"expected a number < {high}")
        return float(value)

    def file_name(self, key: str) -> str:
        """A string used to build file names: one plain name, no path separator, '.' or '..'."""
        value = self.str(key)
        problem = path_name_problem(value, allow_subfolders=False)
        if problem is not None or len(value) > 200:
            raise self.error(f"{self.path}.{key}", problem or "expected at most 200 characters")
        return value

    def sheet(self, key: str, default: Any = _MISSING) -> Any:
        """A spreadsheet sheet: its name or its 0-based position."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "" or (isinstance(value, int) and value < 0):
            raise self.error(f"{self.path}.{key}", "expected a sheet name or a 0-based sheet position")
        return value

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(f"{self.path}.{key}", "expected true or false")
        return value

    def str_list(self, key: str, default: Any = _MISSING, unique: bool = True) -> Any:
        value = self._get(key, default)
        if value is None and default is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.error(f"{self.path}.{key}", "expected a non-empty list of non-empty strings")
        if unique and len(set(value)) != len(value):
            raise self.error(f"{self.path}.{key}", "expected distinct entries")
        return list(value)

    def int_list(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(f"{self.path}.{key}", "expected a non-empty list of integers")
        return list(value)

    def obj(self, key: str, default: Any = _MISSING) -> "Params | None":
        value = self._get(key, default)
        if value is None and default is None:
            return None
        return Params(self.recipe, value, f"{self.path}.{key}")

    def raw_file(self, key: str, raw: dict[str, str], default: Any = _MISSING) -> Any:
        """A parameter naming one of the plan's raw files; returns its absolute path."""
        name = self.str(key, default)
        if name is None:
            return None
        if name not in raw:
            raise self.error(f"{self.path}.{key}", f"raw file {name!r} is not among the given raw files ({', '.join(sorted(raw)) or 'none'})")
        return raw[name]

    def close(self) -> None:
        unknown = sorted(set(self.values) - self.seen)
        if unknown:
            raise self.error(self.path, f"unknown parameter(s) {', '.join(unknown)}")
