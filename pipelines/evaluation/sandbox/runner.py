# Runs ONE calculation of the native engine inside the OS sandbox (README.md): started as
# `python -B -s /sbx/runner.py` in a fresh process, reads {"code", "evidence"} as JSON on stdin, lays
# out the benchmark's calculation environment (evidence.json, indented, and wwb_helpers.py in the working
# folder, which is first on the path; the globals `evidence`, `task`, `observations`), installs the
# second seccomp filter (no execve), says it is ready on fd 3 and closes it, then runs the code as
# `__main__` with CPython's own exit status. Nothing here is
# a security boundary: the code can undo anything this process did that the kernel allows; the
# boundary is the sandbox around it. The outcome is the process's exit status, seen by the supervisor.
import ctypes
import hashlib
import json
import os
import sys
import traceback

_FILTER = "/sbx/seccomp-noexec.bpf"
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _install_filter():
    """The filter bubblewrap installed let this interpreter start; this one refuses execve from now on."""
    program = open(_FILTER, "rb").read()
    if not program or len(program) % 8:
        raise OSError("the no-exec filter is malformed")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    fprog = _Program(len(program) // 8, program)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def _fixed_urandom():
    """os.urandom as a fixed byte stream: the same code gives the same bytes (numpy's unseeded generators too)."""
    state = {"counter": 0, "pool": b""}

    def urandom(size):
        size = int(size)
        if size < 0:
            raise ValueError("negative argument not allowed")
        while len(state["pool"]) < size:
            state["pool"] += hashlib.sha256(b"wwref-sandbox-random-%d" % state["counter"]).digest()
            state["counter"] += 1
        out, state["pool"] = state["pool"][:size], state["pool"][size:]
        return out

    return urandom


def _exit_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def main():
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    code, evidence = request["code"], json.loads(request["evidence"])
    with open("evidence.json", "w", encoding="utf-8") as f:
        json.dump(evidence, f, indent=2)
    with open("/sbx/wwb_helpers.py", "rb") as source, open("wwb_helpers.py", "wb") as copy:
        copy.write(source.read())
    # as a script in the working folder would see it: that folder first, then the project's package
    # (wwb_helpers rests on workflows/evaluation), not the runner's own folder
    sys.path[:] = [os.getcwd(), "/sbx/lib", *[p for p in sys.path if p not in ("/sbx", "")]]
    try:
        _install_filter()
    except OSError as error:
        print(f"sandbox: the no-exec filter could not be installed: {error}", file=sys.stderr)
        return 125
    os.urandom = _fixed_urandom()
    import random

    random.seed(os.urandom(32))
    for fd in (4,):  # bubblewrap's filter descriptor, if it is still open
        try:
            os.close(fd)
        except OSError:
            pass
    sys.argv = ["<calculation>"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "evidence": evidence}
    if isinstance(evidence, dict):
        namespace["task"] = evidence.get("task")
        namespace["observations"] = evidence.get("observations")
    compiled = None
    try:
        compiled = compile(code, "<calculation>", "exec")
    except BaseException as error:  # a syntax error is the code's own error, reported after ready
        failure = error
    # the limits on CPU and wall time count from here: the interpreter's start-up is not the code's
    os.write(3, b'{"ready":true}\n')
    os.close(3)
    if compiled is None:
        traceback.print_exception(type(failure), failure, None)
        return 1
    try:
        exec(compiled, namespace)
    except SystemExit as error:
        return _exit_status(error.code)
    except BaseException as error:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    return 0


if __name__ == "__main__":
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    sys.exit(status)
