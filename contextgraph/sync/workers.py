"""Worker processes that never outlive the process that started them (SPEC §12).

A sync extracts files in a pool of spawned processes. If the sync is killed (SIGKILL, SIGTERM,
anything) its workers must go with it, or they would idle with parent 1 forever and keep the
multiprocessing resource tracker alive too (it exits when the last process holding its pipe
does). Each worker therefore asks the kernel to kill it when its parent dies (Linux
``prctl(PR_SET_PDEATHSIG)``) and, on every platform, runs a watchdog thread that exits the worker
once its parent pid changes — the portable way to notice being orphaned.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_SECONDS = 0.5


def _die_with_parent_linux() -> bool:
    """Ask the kernel for SIGKILL when the parent exits; False where prctl is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned: nothing of ours is left to report to
        time.sleep(WATCH_SECONDS)


def watch_parent(parent_pid: int) -> None:
    """Make this (worker) process exit when ``parent_pid`` is no longer its parent."""
    _die_with_parent_linux()
    threading.Thread(target=_watch, args=(parent_pid,), name="watch-parent", daemon=True).start()
    # The parent may have died before the death signal was armed: check once now.
    if os.getppid() != parent_pid:
        os._exit(1)


def process_pool(max_workers: int) -> ProcessPoolExecutor:
    """A spawned process pool whose workers die with this process.

    spawn, not fork: no database connection (or lock) may cross into a child process.
    """
    return ProcessPoolExecutor(
        max_workers=max_workers,
        mp_context=get_context("spawn"),
        initializer=watch_parent,
        initargs=(os.getpid(),),
    )


__all__ = ["process_pool", "watch_parent"]
