"""Static look at raw files, without preparing anything: what ``wwref add-source --dry-run`` checks and
what ``wwref new-source`` detects.

Run as ``python -m workflows.prepare.inspect`` with one JSON request on standard input; one JSON answer
on standard output:

* ``{"mode": "check", "recipe": ..., "params": {...}, "raw": {name: path}}`` -> ``{"problems": [...],
  "notes": [...]}``: the recipe's parameters read against the files as the recipe would read them
  (tabular: the table's columns, header row, numeric features, target and labels; statsmodels_series:
  columns, numbers, empty cells; skimage_image: an image Pillow opens). A problem is
  ``{"path": [...], "message": ..., "fix": ...}``, its path a field of the plan (``preparation.params.
  features.1``). Raw files missing from ``raw`` are skipped (the caller reports them).
* ``{"mode": "describe", "files": [{"path": ..., "package": "dist:path" | null}]}`` -> per file: sha256,
  bytes, the pinned package that ships it (distribution, version, path inside site-packages) and, for
  such a file, the licence, citation and homepage that package states (workflows/prepare/provenance.py),
  and what it holds: a table (format, compression, header, column names, numeric columns, integral
  columns, distinct values of small columns) or an image (size, mode).

Tables are read with the recipe's own reader (tabular._read_table), so a check agrees with what the
recipe will do.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import json
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pandas as pd

from workflows.contracts import load
from workflows.prepare.provenance import about
from workflows.prepare.tabular import _label_text, _read_table

# what the tabular recipe reads when a parameter is absent (contracts/recipes.json)
TABULAR_DEFAULTS = {key: rule["default"] for key, rule in load("recipes")["tabular"].items() if "default" in rule}

# a column with at most this many distinct values is listed (labels of a classification target)
DISTINCT_LIMIT = 50
# rows read to describe a table (new-source); checks read the whole file
DESCRIBE_ROWS = 5000


def _problem(path: list, message: str, fix: str | None = None) -> dict[str, Any]:
    return {"path": path, "message": message, **({"fix": fix} if fix else {})}


def _is_number(cell: Any) -> bool:
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return True
    try:
        float(cell)
        return True
    except (TypeError, ValueError):
        return False


def _shown(values: list, limit: int = 6) -> str:
    text = ", ".join(repr(v) for v in values[:limit])
    return text + (f", … ({len(values)} in all)" if len(values) > limit else "")


def header_like(table: pd.DataFrame) -> list[str]:
    """Cells of row 1 that are text where every later row of their column is a number: a header row
    read as data. Empty when row 1 looks like data."""
    if len(table) < 2:
        return []
    cells = []
    for column in table.columns:
        first = table[column].iloc[0]
        rest = table[column].iloc[1:]
        if not _is_number(first) and all(_is_number(v) for v in rest):
            cells.append(str(first))
    return cells


def first_bad_cell(values: pd.Series, skip_first: bool) -> tuple[int, Any] | None:
    """0-based position and value of the first cell that float() refuses."""
    for i, value in enumerate(values):
        if skip_first and i == 0:
            continue
        if not _is_number(value):
            return i, value
    return None


# ---------------------------------------------------------------------------------------------
# check


def _check_tabular(params: dict, raw: dict[str, str]) -> tuple[list, list]:
    problems: list = []
    notes: list = []
    name = params.get("file")
    if name not in raw:
        return problems, notes
    fmt = params.get("format")
    header = bool(params.get("header", TABULAR_DEFAULTS["header"]))
    sheet = params.get("sheet", TABULAR_DEFAULTS["sheet"])
    gz = params.get("compression", TABULAR_DEFAULTS["compression"]) == "gzip"
    try:
        table = _read_table(raw[name], fmt, header, sheet, gz)
        for extra in params.get("append_files") or []:
            if extra not in raw:
                continue
            part = _read_table(raw[extra], fmt, header, sheet, gz)
            if len(part) != len(table):
                problems.append(
                    _problem(
                        ["preparation", "params", "append_files"],
                        f"{extra} has {len(part)} rows, {name} has {len(table)}",
                        "append only files with one row per row of the main file",
                    )
                )
                return problems, notes
            table = pd.concat([table.reset_index(drop=True), part.reset_index(drop=True)], axis=1, ignore_index=not header)
    except Exception as error:  # noqa: BLE001 - any reader failure is the plan's problem, named with the file
        problems.append(
            _problem(
                ["preparation", "params", "format"],
                f"{name} cannot be read as {fmt}{' (gzip)' if gz else ''}: {error}",
                "check format, compression and header",
            )
        )
        return problems, notes

    text = fmt in ("csv", "whitespace")
    suspicious = header_like(table) if text and not header else []
    offset = 2 if header else 1  # file row of the table's first row
    if suspicious:
        problems.append(
            _problem(
                ["preparation", "params", "header"],
                f"row 1 of {name} holds text ({_shown(suspicious)}) in columns whose other rows are numbers: "
                "it is a header row read as data",
                'set "header": true; leave out "columns", or keep one name per column to rename them',
            )
        )
    columns = params.get("columns")
    if columns is not None:
        if len(columns) != table.shape[1]:
            problems.append(
                _problem(
                    ["preparation", "params", "columns"],
                    f"{len(columns)} names for the {table.shape[1]} columns of {name}",
                    f"list exactly {table.shape[1]} names, in file order",
                )
            )
            return problems, notes
        table.columns = columns
    names = [str(c) for c in table.columns]
    table.columns = names
    if columns is None and not header and fmt != "arff":
        known = f"without header or columns the columns are named {_shown(names)}"
    else:
        known = f"the columns of {name} are {_shown(names, 12)}"
    features = params.get("features") or []
    target = params.get("target")
    for j, feature in enumerate(features):
        if feature not in names:
            problems.append(
                _problem(
                    ["preparation", "params", "features", j],
                    f"'{feature}' is not a column of {name} ({known})",
                    "name one of the columns, or set header/columns so that the file's columns have these names",
                )
            )
    if target is not None and target not in names:
        problems.append(
            _problem(["preparation", "params", "target"], f"'{target}' is not a column of {name} ({known})", "name one of the columns")
        )

    labels = params.get("labels")
    numeric = [f for f in features if f in names] + ([target] if labels is None and target in names else [])
    for column in numeric:
        bad = first_bad_cell(table[column], skip_first=bool(suspicious))
        if bad is not None:
            row, value = bad
            where = (
                ["preparation", "params", "target"] if column == target else ["preparation", "params", "features", features.index(column)]
            )
            problems.append(
                _problem(
                    where,
                    f"{name} row {row + offset}, column '{column}': {value!r} is not a number",
                    "use numeric columns as features (and a numeric regression target), or clean the file",
                )
            )
    if labels is not None and target in names:
        values = [_label_text(v) for v in table[target]]
        if suspicious:
            values = values[1:]
        present = set(values)
        unknown = sorted(present - set(labels))
        if unknown:
            problems.append(
                _problem(
                    ["preparation", "params", "labels"],
                    f"value(s) {_shown(unknown)} of column '{target}' in {name} are not in labels",
                    "add them to labels (every target value needs a label)",
                )
            )
        for k, label in enumerate(labels):
            if label not in present:
                problems.append(
                    _problem(
                        ["preparation", "params", "labels", k],
                        f"label '{label}' does not occur in column '{target}' of {name} (values: {_shown(sorted(present))})",
                        "remove it from labels, or name the column that holds it",
                    )
                )
    return problems, notes


def _check_series(params: dict, raw: dict[str, str]) -> tuple[list, list]:
    problems: list = []
    name = params.get("file")
    if name not in raw:
        return problems, []
    try:
        table = pd.read_csv(raw[name], dtype=str, keep_default_na=False)
    except Exception as error:  # noqa: BLE001
        return [_problem(["preparation", "params", "file"], f"{name} cannot be read as a CSV with a header row: {error}")], []
    names = list(table.columns)
    for j, column in enumerate(params.get("columns") or []):
        if column not in names:
            problems.append(
                _problem(
                    ["preparation", "params", "columns", j],
                    f"'{column}' is not a column of {name} (columns: {_shown(names, 12)})",
                    "name a column of the file's header row",
                )
            )
            continue
        empty = 0
        for i, cell in enumerate(table[column]):
            if not cell.strip():
                empty += 1
            elif not _is_number(cell):
                problems.append(
                    _problem(
                        ["preparation", "params", "columns", j],
                        f"{name} row {i + 2}, column '{column}': {cell!r} is not a number",
                        "choose a numeric column",
                    )
                )
                break
        if empty and params.get("fill") == "none":
            problems.append(
                _problem(
                    ["preparation", "params", "fill"],
                    f"column '{column}' of {name} has {empty} empty cell(s)",
                    'set "fill": "forward" to fill each from the last earlier value',
                )
            )
    return problems, []


def _check_image(params: dict, raw: dict[str, str]) -> tuple[list, list]:
    name = params.get("file")
    if name not in raw:
        return [], []
    from PIL import Image

    try:
        with Image.open(raw[name]) as image:
            size = image.size
    except Exception as error:  # noqa: BLE001
        return [
            _problem(["preparation", "params", "file"], f"{name} is not an image Pillow can open: {error}", "name a PNG, JPEG or TIFF file")
        ], []
    return [], [f"{name}: {size[0]} x {size[1]} pixels, resized to a longer side of {params.get('longer_side')}"]


CHECKS = {"tabular": _check_tabular, "statsmodels_series": _check_series, "skimage_image": _check_image}


def check(recipe: str, params: dict, raw: dict[str, str]) -> dict[str, Any]:
    if recipe not in CHECKS:
        return {"problems": [], "notes": [f"the contents of the raw files are not checked statically for recipe {recipe}"]}
    problems, notes = CHECKS[recipe](params, raw)
    return {"problems": problems, "notes": notes}


# ---------------------------------------------------------------------------------------------
# describe


def _sha256(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _owner(path: Path) -> dict[str, str] | None:
    """The installed distribution that lists ``path`` among its files, if any."""
    purelib = Path(sysconfig.get_paths()["purelib"]).resolve()
    try:
        relative = path.resolve().relative_to(purelib).as_posix()
    except ValueError:
        return None
    for dist in importlib.metadata.distributions():
        if any(str(f) == relative for f in dist.files or []):
            return {"distribution": dist.metadata["Name"], "version": dist.version, "path": relative}
    return None


def _package_file(spec: str) -> tuple[Path, dict[str, str]]:
    distribution, _, relative = spec.partition(":")
    if not distribution or not relative:
        raise ValueError(f"--package {spec!r}: expected DISTRIBUTION:PATH, e.g. scikit-learn:sklearn/datasets/data/iris.csv")
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(
            f"--package {spec!r}: {distribution} is not installed in the pinned runtime (workflows/requirements.txt)"
        ) from None
    listed = {str(f) for f in dist.files or []}
    if relative not in listed:
        near = sorted(f for f in listed if f.rsplit("/", 1)[-1] == relative.rsplit("/", 1)[-1])
        hint = f" (did you mean {', '.join(near[:3])}?)" if near else ""
        raise ValueError(f"--package {spec!r}: {distribution} {dist.version} ships no file {relative}{hint}")
    path = Path(sysconfig.get_paths()["purelib"]) / relative
    return path, {"distribution": dist.metadata["Name"], "version": dist.version, "path": relative}


def _text_head(path: Path) -> tuple[str, bool]:
    with open(path, "rb") as handle:
        magic = handle.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        head = handle.read(1 << 16)
    return head.decode("utf-8", errors="replace"), magic == b"\x1f\x8b"


def _describe_table(path: Path) -> dict[str, Any]:
    suffix = path.name.lower()
    if suffix.endswith((".xls", ".xlsx")):
        fmt, gz = "excel", False
    elif suffix.endswith(".arff"):
        fmt, gz = "arff", False
    else:
        head, gz = _text_head(path)
        first = head.splitlines()[0] if head.splitlines() else ""
        fmt = "csv" if "," in first else "whitespace"
    if fmt in ("csv", "whitespace"):
        raw_table = _read_table(str(path), fmt, False, 0, gz).head(DESCRIBE_ROWS)
        header = bool(header_like(raw_table)) or (
            len(raw_table) > 1
            and not any(_is_number(v) for v in raw_table.iloc[0])
            and all(_is_number(v) for v in raw_table.iloc[1] if str(v).strip())
        )
        table = _read_table(str(path), fmt, header, 0, gz).head(DESCRIBE_ROWS)
    else:
        header = fmt == "excel"
        table = _read_table(str(path), fmt, header, 0, gz).head(DESCRIBE_ROWS)
    names = [str(c) for c in table.columns]
    numeric = [all(_is_number(v) for v in table[c] if str(v).strip()) for c in table.columns]
    integral = [k and all(float(v).is_integer() for v in table[c] if str(v).strip()) for k, c in zip(numeric, table.columns, strict=False)]
    distinct: dict[str, list[str] | None] = {}
    for name, column in zip(names, table.columns, strict=False):
        values = sorted({_label_text(v) for v in table[column]})
        distinct[name] = values if len(values) <= DISTINCT_LIMIT else None
    empty = {name: int(sum(1 for v in table[column] if not str(v).strip())) for name, column in zip(names, table.columns, strict=False)}
    return {
        "kind": "table",
        "format": fmt,
        "compression": "gzip" if gz else "none",
        "header": header,
        "columns": names,
        "numeric": numeric,
        "integral": integral,
        "distinct": distinct,
        "empty": empty,
        "rows": int(len(table)),
    }


def _describe_image(path: Path) -> dict[str, Any] | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return {"kind": "image", "size": list(image.size), "mode": image.mode}
    except (UnidentifiedImageError, OSError):
        return None


def describe(files: list[dict[str, Any]]) -> dict[str, Any]:
    described = []
    for entry in files:
        if entry.get("package"):
            path, package = _package_file(entry["package"])
        else:
            path = Path(entry["path"])
            if not path.is_file():
                raise ValueError(f"{entry['path']} is not a file")
            package = _owner(path)
        sha256, size = _sha256(path)
        content = _describe_image(path)
        if content is None:
            try:
                content = _describe_table(path)
            except Exception as error:  # noqa: BLE001 - not every raw file is a table
                content = {"kind": "other", "note": f"not read as a table or image: {error}"}
        described.append(
            {
                "path": str(path),
                "name": path.name,
                "sha256": sha256,
                "bytes": size,
                "package": package,
                "content": content,
                "about": about(Path(sysconfig.get_paths()["purelib"]), package) if package else None,
            }
        )
    return {"files": described}


def main() -> None:
    request = json.load(sys.stdin)
    try:
        if request["mode"] == "check":
            answer = check(request["recipe"], request["params"], request["raw"])
        else:
            answer = describe(request["files"])
    except ValueError as error:
        answer = {"error": str(error)}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
