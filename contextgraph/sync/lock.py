"""The one-sync-per-database lock of a database file, and the files that make up a database.

Standard library only (with :mod:`contextgraph.store.nowrite`): a sync answered without
SQLAlchemy (:mod:`contextgraph.sync.unchanged`) takes the same lock as every other sync.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contextgraph.errors import SyncInProgress
from contextgraph.store import nowrite

_thread_lock = threading.Lock()


@contextmanager
def sync_lock(db_path: Path | None, *, wait: bool = True) -> Iterator[None]:
    """Hold the one-sync-per-database lock (an advisory file lock the OS frees on any exit)."""
    if db_path is None:
        acquired = _thread_lock.acquire(blocking=wait)
        if not acquired:
            nowrite.check("wait for another sync")
            raise SyncInProgress("a sync is already running on this database")
        try:
            yield
        finally:
            _thread_lock.release()
        return
    lock_path = db_path.with_name(db_path.name + ".sync.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            nowrite.check("wait for another sync")
            raise SyncInProgress("a sync is already running on this database") from exc
        yield
    finally:
        os.close(fd)  # closing releases the lock


def database_files(db_path: Path | None) -> list[Path]:
    """The database file and the files SQLite and the sync keep beside it: never a source's."""
    if db_path is None:
        return []
    suffixes = ("", "-wal", "-shm", "-journal", ".sync.lock")
    return [db_path.with_name(db_path.name + s) for s in suffixes]


__all__ = ["database_files", "sync_lock"]
