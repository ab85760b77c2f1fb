"""Beat detection (docs/families.md, six options only): filtered ECG envelope, peak picking,
alignment to the |signal| maximum, scored by greedy event matching (F1 at 100 ms)."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.signal import butter, find_peaks, sosfiltfilt

from workflows.families._common import options, result

TOLERANCES_MS = (50, 100, 150)


def predict(data: dict, mask: str) -> np.ndarray:
    opts = options(mask, "beat_detection")
    fs = int(data["sample_rate"])
    signal = np.asarray(data["signal"], dtype=np.float64)
    n = signal.shape[0]

    w = signal - np.median(signal)
    if opts["A"]:
        w = sosfiltfilt(butter(2, 0.5, btype="highpass", fs=fs, output="sos"), w)
    if opts["B"]:
        w = sosfiltfilt(butter(2, 35.0, btype="lowpass", fs=fs, output="sos"), w)

    if opts["C"]:
        envelope = np.diff(w, prepend=w[0]) ** 2  # squared first difference, element 0 is 0
    else:
        envelope = np.abs(w)
    if opts["D"]:
        envelope = uniform_filter1d(envelope, size=max(1, round(0.120 * fs)), mode="nearest")

    if opts["E"]:
        median = np.median(envelope)
        threshold = median + 3 * 1.4826 * np.median(np.abs(envelope - median))
    else:
        threshold = np.mean(envelope) + np.std(envelope)
    distance = max(1, round((0.300 if opts["F"] else 0.200) * fs))
    candidates, _ = find_peaks(envelope, height=threshold, distance=distance)

    # Move each candidate to the largest |w| within ±75 ms (first index wins ties).
    radius = round(0.075 * fs)
    magnitude = np.abs(w)
    aligned = []
    for c in candidates:
        start = max(0, int(c) - radius)
        stop = min(n, int(c) + radius + 1)
        aligned.append(start + int(np.argmax(magnitude[start:stop])))
    events = np.unique(np.asarray(aligned, dtype=np.int64))
    events = events[(events >= fs) & (events < n - fs)].astype(np.int64)

    if not np.all(np.isfinite(w)):
        raise ValueError("Nonfinite filtered signal")
    return events


def match_events(predicted: np.ndarray, reference: np.ndarray, tolerance: int) -> int:
    """Greedy one-to-one matching of two sorted event lists with two pointers; returns the TP count."""
    i = j = matched = 0
    while i < len(predicted) and j < len(reference):
        p, e = int(predicted[i]), int(reference[j])
        if p < e - tolerance:
            i += 1
        elif p > e + tolerance:
            j += 1
        else:
            matched += 1
            i += 1
            j += 1
    return matched


def evaluate(data: dict, prediction: np.ndarray) -> dict:
    fs = int(data["sample_rate"])
    n = int(np.asarray(data["signal"]).shape[0])
    reference = np.sort(np.asarray(data["true_events"], dtype=np.int64))
    reference = reference[(reference >= fs) & (reference < n - fs)]
    predicted = np.asarray(prediction, dtype=np.int64)
    sensitivity = {}
    for tolerance_ms in TOLERANCES_MS:
        tp = match_events(predicted, reference, round(tolerance_ms * fs / 1000))
        n_pred, n_ref = len(predicted), len(reference)
        sensitivity[str(tolerance_ms)] = {
            "true_positive": tp,
            "predicted_events": n_pred,
            "reference_events": n_ref,
            "precision": tp / n_pred if n_pred else 0.0,
            "recall": tp / n_ref if n_ref else 0.0,
            "f1": 2 * tp / (n_pred + n_ref) if (n_pred + n_ref) else 1.0,
        }
    value = sensitivity["100"]["f1"]
    return result(value, "event_F1_at_100ms", value, extras={"matching_tolerance_sensitivity": sensitivity})


def truth(data: dict) -> dict:
    return {
        "true_events": np.asarray(data["true_events"]),
        "n_samples": int(np.asarray(data["signal"]).shape[0]),
        "sample_rate": int(data["sample_rate"]),
    }
