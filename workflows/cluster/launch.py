"""``python -m workflows.cluster.launch FOLDER scheduler|worker [ARGS...]``: Dask's scheduler or worker
command line as pipelines/execution/dask/cluster.ts starts it, in a process group of its own, with a
private FOLDER (the scheduler's address file, Dask's scratch space) and a pipe from the orchestrator on
standard input. Nothing outlives it: when the command ends (SIGTERM closes Dask gracefully) or when the
pipe closes (the orchestrator is gone, however it ended: exit, signal or SIGKILL), its child processes
(the worker processes of a nanny) are killed and FOLDER is removed."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import shutil
import sys
import threading

COMMANDS = {"scheduler": "distributed.cli.dask_scheduler", "worker": "distributed.cli.dask_worker"}
# How long a killed child process may take to be gone before the folder is removed anyway.
CHILD_EXIT_SECONDS = 5


def clean(folder: str) -> None:
    # Children first, so that none writes into the folder while it is removed.
    for child in multiprocessing.active_children():
        child.kill()
        child.join(CHILD_EXIT_SECONDS)
    shutil.rmtree(folder, ignore_errors=True)


def watch(folder: str) -> None:
    """Waits for the end of standard input: nothing is written to it, so that is the orchestrator's end."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    clean(folder)
    os._exit(1)


def main() -> None:
    folder, command, *args = sys.argv[1:]
    # Watching before Dask is imported (a second or two), so that an orchestrator gone meanwhile is seen too.
    threading.Thread(target=watch, args=(folder,), daemon=True).start()
    cli = importlib.import_module(COMMANDS[command])
    try:
        cli.main(args, prog_name=f"dask {command}")
    finally:
        clean(folder)


if __name__ == "__main__":
    main()
