"""The eight workflow families (docs/families.md). Each module exposes

* ``predict(data, mask) -> prediction`` (ndarray, or a dict for retrieval),
* ``evaluate(data, prediction) -> dict`` with utility, native_metric, native_value,
  normalization_scale (or None) and ``extras`` (family-specific record fields),
* ``truth(data) -> dict`` of the held-out values the independent TypeScript metric needs.
"""
from workflows.families import (
    beat_detection,
    classification,
    clustering,
    forecasting,
    graph_link_prediction,
    image_restoration,
    regression,
    retrieval,
)

FAMILIES = {
    "classification": classification,
    "regression": regression,
    "clustering": clustering,
    "forecasting": forecasting,
    "image_restoration": image_restoration,
    "retrieval": retrieval,
    "beat_detection": beat_detection,
    "graph_link_prediction": graph_link_prediction,
}
