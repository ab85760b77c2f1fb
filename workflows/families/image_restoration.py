"""Image restoration (docs/families.md): median → gaussian → Wiener → unsharp (each optional),
clipped to [0, 1], scored by pixel RMSE with a fixed scale of 0.1."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter, median_filter
from scipy.signal import wiener

from workflows.families._common import check_finite_prediction, options, result

SCALE = 0.1


def predict(data: dict, mask: str) -> np.ndarray:
    opts = options(mask, "image_restoration")
    image = np.array(data["noisy"], dtype=np.float64, copy=True)  # never touch the cached input
    if opts["A"]:
        image = median_filter(image, size=5 if opts["F"] else 3, mode="reflect")
    if opts["B"]:
        image = gaussian_filter(image, sigma=1.6 if opts["E"] else 0.8, mode="reflect")
    if opts["C"]:
        image = wiener(image, (5, 5))  # noise power estimated by scipy (mean local variance)
    if opts["D"]:
        image = image + 0.5 * (image - gaussian_filter(image, sigma=1.0, mode="reflect"))
    return np.clip(image, 0.0, 1.0)


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    check_finite_prediction(prediction)
    # numpy mean (pairwise summation) matters for the last bit of the utility.
    rmse = np.sqrt(np.mean((data["clean"] - prediction) ** 2))
    return result(1.0 / (1.0 + rmse / SCALE), "pixel_RMSE", rmse, SCALE)


def truth(data: dict) -> dict:
    return {"clean": np.asarray(data["clean"])}
