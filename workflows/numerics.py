"""The numerical state of this process: the CPU, the BLAS kernels, NumPy's SIMD loops and the C
library's math functions in use.

OpenBLAS chooses its kernels by CPU when it loads (NumPy and SciPy each load their own copy), and
NumPy dispatches its SIMD loops by CPU too; both change the last bits of results. The C library
matters as well: without AVX-512 loops, NumPy's float64 log1p/expm1 are the C library's, so the
report carries a fingerprint of its functions (workflows/libm.py). Every worker reports this state in
its hello, and the orchestrator (pipelines/execution/numerics.ts) refuses a worker whose state
differs from the requested numerical profile before any record runs.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import scipy.linalg  # noqa: F401  loads SciPy's OpenBLAS, so that it is reported as well
from numpy._core import _multiarray_umath as umath
from threadpoolctl import threadpool_info

from workflows import libm

# Variables that steer kernel choices; reported as the worker saw them.
ENVIRONMENT_PREFIXES = ("OPENBLAS_", "NPY_", "MKL_", "OMP_", "GOTO", "GLIBC_TUNABLES")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_libraries() -> list[dict[str, Any]]:
    """One entry per loaded BLAS, named by the package that ships it (numpy.libs -> numpy)."""
    libraries = []
    for pool in threadpool_info():
        if pool.get("user_api") != "blas":
            continue
        path = pool.get("filepath", "")
        folder = os.path.basename(os.path.dirname(path))
        libraries.append(
            {
                "package": folder[: -len(".libs")] if folder.endswith(".libs") else folder,
                "library": os.path.basename(path),
                "internal_api": pool.get("internal_api"),
                "version": pool.get("version"),
                "architecture": pool.get("architecture"),
            }
        )
    return sorted(libraries, key=lambda lib: lib["package"])


def report() -> dict[str, Any]:
    features = umath.__cpu_features__
    return {
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "libc": " ".join(part for part in platform.libc_ver() if part) or "unknown",
        "blas": blas_libraries(),
        "numpy_simd": {
            "baseline": list(umath.__cpu_baseline__),
            "dispatched": [name for name in umath.__cpu_dispatch__ if features.get(name)],
            # What the CPU offers (a feature disabled by NPY_DISABLE_CPU_FEATURES reads False).
            "cpu_features": sorted(name for name, present in features.items() if present),
        },
        "libm": libm.report(),
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENVIRONMENT_PREFIXES)},
    }
