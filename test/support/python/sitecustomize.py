"""Test double of wwref's Python side, loaded by every interpreter whose PYTHONPATH holds this folder
(test/support/doubles.ts): TEST_DELAY_SECONDS slows every record down by that much (its timing
included), TEST_EXIT_ON_MASK ends the process in the middle of that mask's record, so the executors
can be shown to handle slow records, timeouts and crashes; TEST_WRONG_HASH_ON_MASK makes the worker
report another prediction hash than its prediction's bytes give, TEST_WRONG_METRIC_ON_MASK another
native value (and utility) than its prediction gives, so that the orchestrator's own checks can be
shown to catch a worker that lies. Product code knows nothing of this."""

import os
import time

_DELAY = float(os.environ.get("TEST_DELAY_SECONDS") or 0)
_EXIT_ON_MASK = os.environ.get("TEST_EXIT_ON_MASK")
_WRONG_HASH_ON_MASK = os.environ.get("TEST_WRONG_HASH_ON_MASK")
_WRONG_METRIC_ON_MASK = os.environ.get("TEST_WRONG_METRIC_ON_MASK")

if _DELAY or _EXIT_ON_MASK or _WRONG_HASH_ON_MASK or _WRONG_METRIC_ON_MASK:
    from workflows import records

    _run_record = records.run_record

    def _double(family_name, data, mask, stage=None):
        if mask == _EXIT_ON_MASK:
            os._exit(70)
        result = _run_record(family_name, data, mask, stage)
        if mask == _WRONG_HASH_ON_MASK:
            digest = result["prediction_sha256"]
            result["prediction_sha256"] = ("1" if digest[0] == "0" else "0") + digest[1:]
        if mask == _WRONG_METRIC_ON_MASK:
            result["native_value"] += 0.01
            result["utility"] += 0.01
        if _DELAY:
            time.sleep(_DELAY)
            result["metric_wall_seconds"] += _DELAY
            result["wall_seconds"] += _DELAY
        return result

    records.run_record = _double
