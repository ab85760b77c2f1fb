"""Validation of recipe parameters against contracts/recipes.json, the rules the zod schemas of
pipelines/catalog/recipes.ts are built from (contracts/README.md names the parameter types).

Every problem is a ValueError that names the parameter, e.g. ``tabular: params.split.seed: expected an
integer``. Unknown keys are rejected, as the strict zod objects do.
"""

from __future__ import annotations

from typing import Any

from workflows.contracts import load

NAMING = load("naming")


def path_name_problem(name: Any, allow_subfolders: bool) -> str | None:
    """Why ``name`` cannot be used as a file name (or, with ``allow_subfolders``, a '/'-separated
    relative path) inside a folder, or None. The rules of SAFE_FILE_NAME and SAFE_RELATIVE_PATH of
    pipelines/core/containment.ts: no absolute path, no '..' or '.', no backslash, NUL or empty name, and
    the lengths of contracts/naming.json."""
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
    limit = NAMING["path_name_max_characters"] if allow_subfolders else NAMING["file_name_max_characters"]
    if any(len(part) > limit for part in parts):
        return f"{name!r} has a name longer than {limit} characters"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_problem(value: Any, rule: dict[str, Any], kind: str) -> str | None:
    if "minimum" in rule and value < rule["minimum"]:
        return f"expected {kind} >= {rule['minimum']}"
    if "above" in rule and value <= rule["above"]:
        return f"expected {kind} > {rule['above']}"
    if "below" in rule and value >= rule["below"]:
        return f"expected {kind} < {rule['below']}"
    return None


def _names_problem(value: Any) -> str | None:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        return "expected a non-empty list of non-empty strings"
    if len(set(value)) != len(value):
        return "expected distinct entries"
    return None


def _problem(rule: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` breaks ``rule`` (one parameter of contracts/recipes.json), or None."""
    kind = rule["type"]
    if kind in ("text", "raw_file", "choice"):
        if not isinstance(value, str) or not value:
            return "expected a non-empty string"
        if kind == "choice" and value not in rule["choices"]:
            return f"expected one of {', '.join(rule['choices'])}, got {value!r}"
        if "contains_any" in rule and not any(part in value for part in rule["contains_any"]):
            return f"expected a template holding {' and/or '.join(rule['contains_any'])}"
        return None
    if kind == "file_name":
        return path_name_problem(value, allow_subfolders=False)
    if kind in ("names", "raw_files"):
        return _names_problem(value)
    if kind == "boolean":
        return None if isinstance(value, bool) else "expected true or false"
    if kind == "integer":
        return _number_problem(value, rule, "an integer") if _is_int(value) else "expected an integer"
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "expected a number"
        return _number_problem(value, rule, "a number")
    if kind == "integers":
        return None if isinstance(value, list) and value and all(map(_is_int, value)) else "expected a non-empty list of integers"
    if kind == "sheet":
        ok = (isinstance(value, str) and value != "") or (_is_int(value) and value >= 0)
        return None if ok else "expected a sheet name or a 0-based sheet position"
    raise ValueError(f"contracts/recipes.json: unknown parameter type {kind!r}")


class Params:
    """One params object, checked whole against its recipe's rules when made (each parameter in the
    contract's order, unknown keys last); ``get`` then reads a value, its default, or None."""

    def __init__(self, recipe: str, values: Any, path: str = "params", rules: dict[str, Any] | None = None) -> None:
        self.recipe, self.path = recipe, path
        self.rules = load("recipes")[recipe] if rules is None else rules
        if not isinstance(values, dict):
            raise self.error(path, "expected an object")
        self.values = values
        self.objects: dict[str, Params] = {}
        for key, rule in self.rules.items():
            where = f"{path}.{key}"
            if key not in values:
                if "default" not in rule and not rule.get("optional"):
                    raise self.error(where, "required parameter is missing")
            elif rule["type"] == "object":
                self.objects[key] = Params(recipe, values[key], where, rule["params"])
            elif rule["type"] == "integer_map":
                self._check_map(rule, values[key], where)
            else:
                problem = _problem(rule, values[key])
                if problem is not None:
                    raise self.error(where, problem)
        unknown = sorted(set(values) - set(self.rules))
        if unknown:
            raise self.error(path, f"unknown parameter(s) {', '.join(unknown)}")

    def _check_map(self, rule: dict[str, Any], value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise self.error(where, "expected an object")
        for key, number in value.items():
            problem = "expected a non-empty name" if key == "" else _problem({**rule, "type": "integer"}, number)
            if problem is not None:
                raise self.error(f"{where}.{key}", problem)

    def error(self, where: str, message: str) -> ValueError:
        return ValueError(f"{self.recipe}: {where}: {message}")

    def get(self, key: str) -> Any:
        """The parameter's value (a number as float, an object as Params), its default, or None."""
        rule = self.rules[key]
        if rule["type"] == "object":
            return self.objects.get(key)
        value = self.values.get(key, rule.get("default"))
        return float(value) if rule["type"] == "number" and value is not None else value

    def raw_file(self, key: str, raw: dict[str, str]) -> Any:
        """A parameter naming one of the plan's raw files; returns its absolute path (None when absent)."""
        name = self.get(key)
        if name is None:
            return None
        if name not in raw:
            raise self.error(
                f"{self.path}.{key}", f"raw file {name!r} is not among the given raw files ({', '.join(sorted(raw)) or 'none'})"
            )
        return raw[name]
