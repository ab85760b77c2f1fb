"""Recipe ``skimage_image``: one photograph -> image-restoration input (docs/recipes.md).

Open with Pillow and convert to grey (mode 'L') *before* resizing; resize with LANCZOS so the longer
side becomes ``longer_side`` (other side round(side x scale)); clean = uint8 / 255 as float64;
noisy = clip(clean + default_rng(seed).normal(0, noise_std, clean.shape), 0, 1), a fresh generator per
image. Arrays: noisy, clean; metadata {}. Facts input_sha256 / reference_sha256 = sha256 of the raw
bytes of noisy / clean.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from PIL import Image

from workflows.container import write_prepared
from workflows.prepare._params import Params


def run(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    path = p.raw_file("file", raw)
    longer_side = p.get("longer_side")
    noise_std = p.get("noise_std")
    seed = p.get("seed")

    with Image.open(path) as image:
        original_size = list(image.size)  # (width, height)
        grey = image.convert("L")
    width, height = grey.size
    if max(width, height) != longer_side:
        scale = longer_side / max(width, height)
        grey = grey.resize((round(width * scale), round(height * scale)), Image.Resampling.LANCZOS)
    clean = np.asarray(grey, dtype=np.uint8).astype(np.float64) / 255.0
    noise = np.random.default_rng(seed).normal(0.0, noise_std, size=clean.shape)
    noisy = np.clip(clean + noise, 0.0, 1.0)

    write_prepared(out, [("noisy", noisy), ("clean", clean)], {})
    return {
        "original_size": original_size,
        "evaluation_shape": list(clean.shape),
        "input_sha256": hashlib.sha256(np.ascontiguousarray(noisy).tobytes()).hexdigest(),
        "reference_sha256": hashlib.sha256(np.ascontiguousarray(clean).tobytes()).hexdigest(),
    }
