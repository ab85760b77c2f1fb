"""The eight workflow families (docs/families.md), in the order of contracts/families.json, which also
gives each one's mask widths and prediction-hash rule. Each module exposes

* ``predict(data, mask) -> prediction`` (ndarray, or a dict for retrieval),
* ``evaluate(data, prediction) -> dict`` with utility, native_metric, native_value,
  normalization_scale (or None) and ``extras`` (family-specific record fields),
* ``truth(data) -> dict`` of the held-out values the independent TypeScript metric needs.
"""

from importlib import import_module

from workflows.contracts import load

REGISTRY = {
    family["name"]: {"dimensions": family["dimensions"], "hash_rule": family["hash_rule"]} for family in load("families")["families"]
}

FAMILIES = {name: import_module(f"workflows.families.{name}") for name in REGISTRY}
