"""The Python side of evaluation: the benchmark's estimators and designs (the numerical controls of
../shared/spec/controls.md as the README states them), computed in the pinned runtime.

Not part of the workflow-code digest of the references (contracts/identity.json skips folders named
``evaluation``): nothing here decides a reference record. Control records carry this folder's own
digest (:func:`workflows.evaluation.worker.code_sha256`)."""
