"""Refuse what must not run in a worker process that is still starting (sync/workers.py).

Kept apart from :mod:`contextgraph.sync.workers` so that taking the sync lock, which every sync
and note write does, need not import multiprocessing.
"""

from __future__ import annotations

import sys

from contextgraph.errors import ContextGraphError


def starting_worker() -> bool:
    """True while this process is a spawned multiprocessing child that is still starting.

    A spawned child first re-imports the parent's main script (as ``__mp_main__``); a script
    that calls contextgraph at its top level, without ``if __name__ == "__main__":``, would run
    that call in every worker of a sync. No public API tells this start-up phase apart:
    ``multiprocessing.parent_process()`` is set for the child's whole life, in which a sync is
    legitimate. So this reads the private ``_inheriting`` flag that ``multiprocessing.spawn``
    (and ``forkserver``) set for exactly that phase, the flag CPython's own guard against
    starting processes from there (``spawn._check_not_importing_main``) reads.
    tests/test_worker_failures.py fails (times out) should a Python drop it.
    """
    process = sys.modules.get("multiprocessing.process")  # not imported: not a spawned child
    return process is not None and bool(getattr(process.current_process(), "_inheriting", False))


def refuse_while_starting(what: str) -> None:
    """Raise at once when called by a worker process that is still starting (see above).

    Waiting there would hang for ever: the sync that started the worker holds the sync lock
    and waits for its workers.
    """
    if starting_worker():
        raise ContextGraphError(
            f"cannot {what} in a worker process that is starting: multiprocessing re-imports "
            "the main script in each worker, and its top level calls contextgraph; put that "
            'code under `if __name__ == "__main__":`'
        )


__all__ = ["refuse_while_starting", "starting_worker"]
