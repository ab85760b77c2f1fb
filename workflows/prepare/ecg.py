"""Recipe ``mitdb_ecg``: one MIT-BIH record -> beat-detection input (docs/recipes.md).

The wfdb package reads the header, the format-212 signal and the .atr annotations. Channel: the first
of ``channels`` present in the record (MLII), else the record's first channel. signal = (adc - baseline)
/ gain as float64 over the first ``samples`` samples; true_events = int64 sample times of the
annotations whose code is in ``qrs_codes`` and which fall before ``samples``; sample_rate = 0-d int64.
Raw files are named <record>.hea, <record>.dat and <record>.atr; ``record`` is one plain file name
(no path separator, '.' or '..'), so the three links made for wfdb stay inside their temporary folder.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import wfdb

from workflows.container import write_prepared
from workflows.prepare._params import Params


def run(p: Params, raw: dict[str, str], out: str) -> dict[str, Any]:
    record = p.get("record")
    channels = p.get("channels")
    samples = p.get("samples")
    qrs_codes = p.get("qrs_codes")
    files = {ext: f"{record}.{ext}" for ext in ("hea", "dat", "atr")}
    absent = [name for name in files.values() if name not in raw]
    if absent:
        raise p.error("params.record", f"raw file(s) {', '.join(absent)} are not among the given raw files")

    # wfdb reads a record by base name, so the three files must sit side by side under their own names
    with tempfile.TemporaryDirectory(prefix="wwref-mitdb-") as folder:
        for name in files.values():
            link = os.path.join(folder, name)
            if os.path.dirname(link) != folder:  # already excluded by the file_name rule; never link outside
                raise p.error("params.record", f"{record!r} leaves the record folder")
            os.symlink(os.path.abspath(raw[name]), link)
        base = os.path.join(folder, record)
        header = wfdb.rdheader(base)
        if header.sig_len < samples:
            raise ValueError(f"mitdb_ecg: record {record} has {header.sig_len} samples, fewer than {samples}")
        signals = wfdb.rdrecord(base, sampto=samples, physical=False)
        annotations = wfdb.rdann(base, "atr", return_label_elements=["label_store"])

    chosen = next((name for name in channels if name in signals.sig_name), signals.sig_name[0])
    index = signals.sig_name.index(chosen)
    adc = signals.d_signal[:, index].astype(np.float64)
    signal = (adc - signals.baseline[index]) / signals.adc_gain[index]
    keep = np.isin(annotations.label_store, qrs_codes) & (annotations.sample < samples)
    true_events = annotations.sample[keep].astype(np.int64)
    sample_rate = int(signals.fs)
    if sample_rate != signals.fs:
        raise ValueError(f"mitdb_ecg: record {record} has a non-integer sampling rate {signals.fs}")

    write_prepared(out, [("signal", signal), ("true_events", true_events), ("sample_rate", np.array(sample_rate, dtype=np.int64))], {})
    return {
        "record": record,
        "samples": samples,
        "sample_rate_hz": sample_rate,
        "seconds": samples / sample_rate,
        "channel": chosen,
        "units": signals.units[index],
        "reference_events": int(len(true_events)),
        "annotations": int(len(annotations.sample)),
        "qrs_label_codes": qrs_codes,
    }
