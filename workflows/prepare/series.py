"""Recipe ``statsmodels_series``: a statsmodels dataset CSV -> forecasting input (docs/recipes.md).

``columns`` lists the value columns: one column is read top to bottom (co2, sunspots, nile); several
columns (elnino's JAN..DEC) are unrolled row by row, in the listed column order. Empty cells are
filled causally with the last earlier value when ``fill`` is "forward" (co2), and are an error otherwise.
The series is float64; metadata ``cut`` = floor(cut_fraction x N), the exclusive end of the training
prefix.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from workflows.container import write_prepared
from workflows.prepare._params import Params


def run(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    path = p.raw_file("file", raw)
    columns = p.get("columns")
    fill = p.get("fill")
    cut_fraction = p.get("cut_fraction")

    # cells as text, converted with Python's correctly rounded float(); an empty cell is missing
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing_columns = [c for c in columns if c not in table.columns]
    if missing_columns:
        raise p.error("params.columns", f"not in {path}: {', '.join(missing_columns)} (has {', '.join(table.columns)})")
    cells = table[columns].to_numpy(dtype=object).reshape(-1)  # C order: row by row, columns as listed
    values = pd.Series([float(c) if c.strip() else np.nan for c in cells], dtype=np.float64)
    missing = int(values.isna().sum())
    if missing and fill == "none":
        raise ValueError(f"statsmodels_series: {missing} empty value(s) in {path}; set fill to 'forward' to fill them")
    if np.isnan(values.iloc[0]):
        raise ValueError(f"statsmodels_series: the first value of {path} is missing, so it cannot be forward filled")
    series = values.ffill().to_numpy(dtype=np.float64)

    cut = math.floor(cut_fraction * len(series))
    write_prepared(out, [("series", series)], {"cut": cut})
    return {
        "series_length": int(len(series)),
        "cut": cut,
        "training_stop_exclusive": cut,
        "evaluation_points": int(len(series)) - cut,
        "causally_forward_filled_points": missing,
    }
