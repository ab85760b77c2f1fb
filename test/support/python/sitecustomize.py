"""Test double of wwref's Python side, loaded by every interpreter whose PYTHONPATH holds this folder
(test/support/doubles.ts): TEST_DELAY_SECONDS slows every record down by that much (its timing
included), TEST_EXIT_ON_MASK ends the process in the middle of that mask's record, so the executors
can be shown to handle slow records, timeouts and crashes. Product code knows nothing of this."""

import os
import time

_DELAY = float(os.environ.get("TEST_DELAY_SECONDS") or 0)
_EXIT_ON_MASK = os.environ.get("TEST_EXIT_ON_MASK")

if _DELAY or _EXIT_ON_MASK:
    from workflows import records

    _run_record = records.run_record

    def _double(family_name, data, mask, stage=None):
        if mask == _EXIT_ON_MASK:
            os._exit(70)
        result = _run_record(family_name, data, mask, stage)
        if _DELAY:
            time.sleep(_DELAY)
            result["metric_wall_seconds"] += _DELAY
            result["wall_seconds"] += _DELAY
        return result

    records.run_record = _double
