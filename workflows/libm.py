"""A fingerprint of the C library's math functions as this process resolves them (contracts/libm.json).

Under the portable profile NumPy's float64 log1p/expm1 are the C library's, and scikit-learn's and
CPython's math call it directly, so the last bits of records depend on which variant the C library
picked (glibc chooses FMA code on FMA CPUs since 2.36-9+deb12u10 in Debian, 2.41 upstream, not in
2.31). The profile pins log1p/expm1 to glibc's generic code with a preloaded library (the libm pin,
native/libm-pin/) and checks the other functions the families reach. Each function is evaluated on
fixed probe inputs chosen where the variants disagree; its digest is the first 16 hex digits of the
sha256 of the little-endian float64 results (sincos: sine then cosine of each input).
"""

from __future__ import annotations

import ctypes
import hashlib
import struct
from collections.abc import Iterable
from typing import Any

from workflows.contracts import load


def probes() -> dict[str, list[Any]]:
    """The probe inputs of each function, as floats (pairs for pow)."""

    def parse(value: Any) -> Any:
        return [parse(v) for v in value] if isinstance(value, list) else float.fromhex(value)

    return {name: [parse(v) for v in values] for name, values in load("libm")["probes"].items()}


def digest(values: Iterable[float]) -> str:
    data = b"".join(struct.pack("<d", v) for v in values)
    return hashlib.sha256(data).hexdigest()[:16]


def _results(library: ctypes.CDLL, name: str, inputs: list[Any]) -> list[float]:
    if name == "sincos":
        sincos = library.sincos
        sincos.restype = None
        sincos.argtypes = [ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
        out: list[float] = []
        for x in inputs:
            s, c = ctypes.c_double(), ctypes.c_double()
            sincos(x, ctypes.byref(s), ctypes.byref(c))
            out += [s.value, c.value]
        return out
    function = getattr(library, name)
    function.restype = ctypes.c_double
    if name == "pow":
        function.argtypes = [ctypes.c_double, ctypes.c_double]
        return [function(x, y) for x, y in inputs]
    function.argtypes = [ctypes.c_double]
    return [function(x) for x in inputs]


def digests(library: ctypes.CDLL, names: Iterable[str]) -> dict[str, str]:
    """The digest of each named function of `library` on its probes."""
    inputs = probes()
    return {name: digest(_results(library, name, inputs[name])) for name in names}


def pin_identity(library: ctypes.CDLL) -> str | None:
    """The build identity of the libm pin loaded into `library`'s scope, or None when none is."""
    try:
        return ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(library, "wwref_libm_pin"))).value.decode()
    except ValueError:
        return None


def report() -> dict[str, Any]:
    """The fingerprint of this process: every probed function as the process resolves it (a preloaded
    library first, as for NumPy's own calls), and NumPy's ufuncs of the pinned functions, which must
    give the same bits when NumPy takes them from the C library."""
    import numpy as np

    process = ctypes.CDLL(None)
    inputs = probes()
    pinned = load("libm")["pin"]["functions"]
    return {
        "pin": pin_identity(process),
        "functions": digests(process, inputs),
        "numpy": {name: digest(getattr(np, name)(np.array(inputs[name], dtype=np.float64)).tolist()) for name in pinned},
    }
