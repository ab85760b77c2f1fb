"""Preparation recipes: raw source files -> prepared input (docs/recipes.md).

``run_recipe(recipe, params, raw, out)`` is what the worker's ``prepare`` operation calls:
* ``recipe``: the recipe kind of the construction plan (sources/<source>.plan.json, preparation.recipe);
* ``params``: the plan's preparation.params, validated here (ValueError naming the parameter) by the
  rules of contracts/recipes.json that pipelines/catalog/recipes.ts validates them by on the TypeScript
  side, then by the recipe's own ``check`` of the rules that tie parameters together;
* ``raw``: {raw file name as in the plan's raw_files[].name: absolute path of the sha256-checked file};
* ``out``: the folder that receives arrays.npz and metadata.json.gz (workflows/container.py).

It returns the facts of the source manifest: counts, split identities, shapes... (JSON-serialisable),
plus ``files_sha256`` of the two prepared files. One module per recipe kind:

| recipe | module | sources |
| --- | --- | --- |
| tabular | tabular.py | UCI tables: classification, regression, clustering |
| statsmodels_series | series.py | co2, elnino, sunspots, nile |
| skimage_image | image.py | astronaut, coffee, hubble_deep_field, rocket |
| mitdb_ecg | ecg.py | MIT-BIH records 100-103 |
| newman_graph | graph.py | lesmis, adjnoun, football, dolphins |
| beir_retrieval | retrieval.py | scifact |
| arguana_retrieval | retrieval.py | arguana (fails: construction not published, see there) |
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workflows.container import ARRAYS_FILE, METADATA_FILE
from workflows.prepare import ecg, graph, image, retrieval, series, tabular
from workflows.prepare._params import Params, path_name_problem

Recipe = Callable[[Params, dict[str, str], str], dict[str, Any]]

RECIPES: dict[str, Recipe] = {
    "tabular": tabular.run,
    "statsmodels_series": series.run,
    "skimage_image": image.run,
    "mitdb_ecg": ecg.run,
    "newman_graph": graph.run,
    "beir_retrieval": retrieval.run_beir,
    "arguana_retrieval": retrieval.run_arguana,
}

CHECKS: dict[str, Callable[[Params], None]] = {"tabular": tabular.check}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def validate(recipe: str, params: Any) -> Params:
    """The parameters of a known recipe, checked before anything is read."""
    p = Params(recipe, params)
    if recipe in CHECKS:
        CHECKS[recipe](p)
    return p


def run_recipe(recipe: str, params: dict, raw: dict[str, str], out: str) -> dict[str, Any]:
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r} (known: {', '.join(RECIPES)})")
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{recipe}: raw must map raw file names to paths")
    for name, path in raw.items():
        problem = path_name_problem(name, allow_subfolders=True)
        if problem is not None:
            raise ValueError(f"{recipe}: raw file name: {problem}")
        if not Path(path).is_file():
            raise FileNotFoundError(f"{recipe}: raw file {name!r} not found at {path}")
    facts = RECIPES[recipe](validate(recipe, params), raw, out)
    facts["files_sha256"] = {name: _sha256(Path(out) / name) for name in (ARRAYS_FILE, METADATA_FILE)}
    return facts
