"""Marks of the worker's side of each request, for `scripts/bench.ts --section overhead` only.

Loaded by an interpreter whose PYTHONPATH holds this folder and whose environment names
WWREF_BENCH_TRACE (a folder): it wraps, from outside, the functions of workflows/ a request goes
through and writes one JSON line per request to <folder>/<pid>.jsonl, with time.perf_counter_ns()
marks (CLOCK_MONOTONIC, the clock of Node's process.hrtime). Nothing under workflows/ changes, so the
code digest the workers report stays the references' own. Marks: read (the request's line arrived),
compute_start and compute_end (the record's own measured seconds, ending where its hash starts),
hash_end, result_end (run_record returned), encoded (the response's bytes built), then on a line of
its own sent (written; missing when the worker was stopped right after its last response)."""

import json
import os
import time

_FOLDER = os.environ.get("WWREF_BENCH_TRACE")

if _FOLDER:
    from workflows import protocol, records

    _files: dict[int, object] = {}
    _current: dict[str, object] = {}

    def _write(marks: dict) -> None:
        pid = os.getpid()
        if pid not in _files:
            _files[pid] = open(os.path.join(_FOLDER, f"{pid}.jsonl"), "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        _files[pid].write(json.dumps(marks) + "\n")

    def _lines(requests):
        for line in requests:
            _current.clear()
            _current["read"] = time.perf_counter_ns()
            yield line

    _serve = protocol.serve

    def _traced_serve(requests, responses, ops, later=None):
        send = responses.send

        def traced_send(data: bytes) -> None:
            # the marks are written before the response: a worker the orchestrator stops right after
            # its last response (another condition's turn) still leaves them; the send's end follows
            _current["encoded"] = time.perf_counter_ns()
            if "mask" in _current:
                _write(dict(_current))
            send(data)
            if "mask" in _current:
                _write({"mask": _current["mask"], "sent": time.perf_counter_ns()})

        responses.send = traced_send
        return _serve(_lines(requests), responses, ops, later)

    protocol.serve = _traced_serve

    _hash = records.prediction_sha256
    _run_record = records.run_record

    def _traced_hash(rule, prediction):
        _current["hash_start"] = time.perf_counter_ns()
        digest = _hash(rule, prediction)
        _current["hash_end"] = time.perf_counter_ns()
        return digest

    def _traced_run_record(family_name, data, mask, stage=None):
        _current["run_start"] = time.perf_counter_ns()
        result = _run_record(family_name, data, mask, stage)
        _current["result_end"] = time.perf_counter_ns()
        _current["mask"] = mask
        _current["compute_end"] = _current["hash_start"]
        _current["compute_start"] = _current["hash_start"] - round(result["wall_seconds"] * 1e9)
        return result

    records.prediction_sha256 = _traced_hash
    records.run_record = _traced_run_record
