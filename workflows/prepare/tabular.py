"""Recipe ``tabular``: a UCI table -> classification, regression or clustering input (docs/recipes.md).

Steps: parse the table (text, spreadsheet or ARFF); name its columns; take the feature columns (float64,
in the listed order) and the target column; drop rows identical in every feature and the target, keeping
the first in file order; encode labels as int64 positions in the plan's (sorted) label list, or keep a
float64 target for regression. ``decimals`` {rounding, places: {column: n}} rounds values read at a
higher precision to n decimals, as the text export the catalog read did (concrete, energy_efficiency:
the classic spreadsheets hold more digits than UCI's data.csv; half_up on the shortest decimal repr
reproduces the published bytes); {rounding, width: w} instead rounds every feature value to the decimals
that a spreadsheet's "General" format shows in a column w characters wide: w - (integer digits) - 1
(dry_bean's UCI export, recovered in scripts/recover/README.md). Classification and regression are then split into training and
evaluation rows, grouped by identical feature vector: group = index of the row's vector among the
sorted unique vectors (numpy unique, axis 0), one GroupShuffleSplit(test_size, random_state=seed); both
sides keep file order. Clustering keeps every row and stores n_clusters = number of labels.

Compatible extensions for new sources (absent from the 30 published plans, whose bytes they leave
unchanged): ``compression`` "gzip" reads a gzip-compressed text table (raw files are cached under their
sha256, without a file extension, so nothing is inferred from the name); ``append_files`` lists further
raw files of the same format whose columns are appended, in order, to the right of ``file``'s columns
(same number of rows), e.g. scikit-learn's diabetes data, which keeps its target in a separate file.

Split identity (facts ``evaluation_index_sha256``, our own definition, not the published split_sha256
whose pre-image is unknown): sha256 of the canonical JSON (workflows.hashing.digest) of the ascending
list of evaluation row positions, counted in the de-duplicated table.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pandas as pd
from scipy.io import arff
from sklearn.model_selection import GroupShuffleSplit

from workflows.container import write_prepared
from workflows.hashing import digest
from workflows.prepare._params import Params


def _read_table(path: str, fmt: str, header: bool, sheet: Any, gzip: bool = False) -> pd.DataFrame:
    """All cells of text formats stay strings (converted later with Python's correctly rounded float())."""
    head = 0 if header else None
    text = {"compression": "gzip"} if gzip else {}  # only text formats can be compressed
    if fmt == "csv":
        return pd.read_csv(path, header=head, dtype=str, keep_default_na=False, **text)
    if fmt == "whitespace":  # runs of blanks/tabs separate fields (seeds has doubled tabs, yacht trailing blanks)
        return pd.read_csv(path, sep=r"\s+", header=head, dtype=str, keep_default_na=False, **text)
    if fmt == "excel":  # pandas picks xlrd for .xls and openpyxl for .xlsx
        table = pd.read_excel(path, sheet_name=sheet, header=head)
        return table.dropna(how="all").dropna(axis=1, how="all")  # energy's used range has empty rows
    data, _ = arff.loadarff(path)
    return pd.DataFrame(data)


def _round_text(value: float, places: int, half: str) -> float:
    """Round like decimal text: half_even on the exact binary value (Python's format), or half_up on the
    shortest decimal repr (what a spreadsheet export does)."""
    if half == "half_even":
        return float(f"{value:.{places}f}")
    return float(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _label_text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _numbers(p: Params, table: pd.DataFrame, column: str, name: Any, first_row: int, header_hint: bool, where: str) -> np.ndarray:
    """One column as float64 (Python float() of each text cell). A cell float() refuses is an error
    naming the file, its row (1-based, as an editor shows it) and column, with the parameter that fixes
    it: a header row read as data (row 1 text, the rest numbers) suggests ``header: true``."""
    cells = table[column].to_numpy(dtype=object)
    try:
        return np.array(cells, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    for i, cell in enumerate(cells):
        try:
            float(cell)
        except (TypeError, ValueError):
            row = i + first_row
            if header_hint and i == 0:
                hint = "; row 1 looks like a header row (the rows below it are numbers): set header: true"
            else:
                hint = "; choose numeric feature columns (and a numeric regression target), or clean the file"
            raise p.error(where, f"{name} row {row}, column {column!r}: {cell!r} is not a number{hint}") from None
    return np.array(cells, dtype=np.float64)


def check(p: Params) -> None:
    """The rules that tie the parameters together (tabularRules of pipelines/catalog/recipes.ts)."""
    task, fmt, features, target, labels = p.get("task"), p.get("format"), p.get("features"), p.get("target"), p.get("labels")
    text = fmt in ("csv", "whitespace")
    if target in features:
        raise p.error("params.target", "the target column must not be a feature")
    if (task == "regression") != (labels is None):
        raise p.error("params.labels", "required for classification and clustering, absent for regression")
    if (task == "clustering") != (p.get("split") is None):
        raise p.error("params.split", "required for classification and regression, absent for clustering")
    if fmt != "excel" and "sheet" in p.values:
        raise p.error("params.sheet", "only a spreadsheet (format excel) has sheets")
    if fmt == "arff" and p.get("header"):
        raise p.error("params.header", "an ARFF file names its own columns")
    if p.get("compression") != "none" and not text:
        raise p.error("params.compression", "only text formats (csv, whitespace) can be read compressed")
    appended = p.get("append_files")
    if appended is not None and not text:
        raise p.error("params.append_files", "only text formats (csv, whitespace) can be appended")
    if appended is not None and p.get("file") in appended:
        raise p.error(f"params.append_files.{appended.index(p.get('file'))}", "the main file cannot be appended to itself")
    decimals = p.get("decimals")
    if decimals is not None:
        if (decimals.get("places") is None) == (decimals.get("width") is None):
            raise p.error("params.decimals", "give either places or width")
        for column in decimals.get("places") or {}:
            if column not in features and not (column == target and labels is None):
                raise p.error(f"params.decimals.places.{column}", "only feature columns or a regression target can be rounded")


def run(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    path = p.raw_file("file", raw)
    fmt, header, sheet, compression = p.get("format"), p.get("header"), p.get("sheet"), p.get("compression")
    appended_paths = []
    for i, name in enumerate(p.get("append_files") or []):
        if name not in raw:
            raise p.error(f"params.append_files.{i}", f"raw file {name!r} is not among the given raw files ({', '.join(sorted(raw))})")
        appended_paths.append(raw[name])
    task, columns, features, target, labels = p.get("task"), p.get("columns"), p.get("features"), p.get("target"), p.get("labels")
    decimals = p.get("decimals")
    half = None if decimals is None else decimals.get("rounding")
    width = None if decimals is None else decimals.get("width")
    rounding = {} if decimals is None else decimals.get("places") or {}
    drop_duplicates = p.get("drop_duplicates")
    split = p.get("split")
    test_size = seed = None
    if split is not None:
        test_size, seed = split.get("test_size"), split.get("seed")

    table = _read_table(path, fmt, header, sheet, compression == "gzip")
    if appended_paths:
        parts = [table]
        for i, extra in enumerate(appended_paths):
            part = _read_table(extra, fmt, header, sheet, compression == "gzip")
            if len(part) != len(table):
                raise p.error(f"params.append_files.{i}", f"{len(part)} rows, but the main file has {len(table)}")
            parts.append(part)
        table = pd.concat([part.reset_index(drop=True) for part in parts], axis=1, ignore_index=not header)
        if header and table.columns.duplicated().any():
            raise p.error(
                "params.append_files",
                f"column name(s) repeated across files: {', '.join(map(str, table.columns[table.columns.duplicated()]))}",
            )
    if columns is not None:
        if len(columns) != table.shape[1]:
            raise p.error("params.columns", f"{len(columns)} names for a table of {table.shape[1]} columns")
        table.columns = columns
    name = p.values.get("file")
    missing = [c for c in [*features, target] if c not in table.columns]
    if missing:
        hint = (
            "; set header: true if the first row names the columns, or list every column name in columns"
            if columns is None and not header and fmt != "arff"
            else ""
        )
        raise p.error(
            "params.features/target", f"column(s) not in {name}: {', '.join(missing)} (has {', '.join(map(str, table.columns))}){hint}"
        )

    raw_rows = len(table)
    first_row = 2 if header else 1  # file row of the table's first row (1-based)
    header_hint = fmt in ("csv", "whitespace") and not header
    x = (
        np.column_stack([_numbers(p, table, c, name, first_row, header_hint, f"params.features.{j}") for j, c in enumerate(features)])
        if len(table)
        else np.empty((0, len(features)))
    )
    if labels is None:
        y = _numbers(p, table, target, name, first_row, header_hint, "params.target")
    else:
        position = {label: i for i, label in enumerate(labels)}
        texts = [_label_text(v) for v in table[target]]
        unknown = sorted(set(texts) - set(position))
        if unknown:
            row = texts.index(unknown[0]) + first_row
            hint = (
                "; row 1 looks like a header row: set header: true"
                if header_hint and row == 1 and texts.count(unknown[0]) == 1
                else "; add them to labels"
            )
            raise p.error(
                "params.labels",
                f"{name} row {row}, column {target!r}: target value(s) {', '.join(map(repr, unknown))} are not in the label list{hint}",
            )
        y = np.array([position[t] for t in texts], dtype=np.int64)
    for column, places in rounding.items():  # decimal text rounding of values read at higher precision
        values = y if column == target else x[:, features.index(column)]
        values[:] = [_round_text(v, places, half) for v in values]
    if decimals is not None and width is not None:
        x[:] = [[_round_text(v, width - len(str(int(abs(v)))) - 1, half) for v in row] for row in x]
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"tabular: {path} holds missing or non-finite values")

    if drop_duplicates:
        # first occurrence of every distinct (features, target) row, back in file order
        _, first = np.unique(np.column_stack([x, y.astype(np.float64)]), axis=0, return_index=True)
        keep = np.sort(first)
        x, y = x[keep], y[keep]

    facts: dict[str, Any] = {
        "raw_rows": raw_rows,
        "rows": int(len(x)),
        "removed_duplicate_feature_label_rows": raw_rows - int(len(x)),
        "features": features,
        "target": target,
        "target_labels": labels,
    }
    if task == "clustering":
        write_prepared(out, [("x", x), ("y", y)], {"n_clusters": len(labels)})
        return {**facts, "n_clusters": len(labels)}

    _, groups = np.unique(x, axis=0, return_inverse=True)
    groups = groups.reshape(-1)
    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train, evaluation = (np.sort(side) for side in next(splitter.split(x, y, groups)))
    write_prepared(out, [("x_train", x[train]), ("y_train", y[train]), ("x_eval", x[evaluation]), ("y_eval", y[evaluation])], {})
    return {
        **facts,
        "train_rows": int(len(train)),
        "evaluation_rows": int(len(evaluation)),
        "feature_groups": int(groups.max()) + 1,
        "feature_group_overlap": len(set(groups[train].tolist()) & set(groups[evaluation].tolist())),
        "evaluation_index_sha256": digest(evaluation.tolist()),
    }
