"""The one-sync-per-database lock of a database file, and the files that make up a database.

Standard library only (with :mod:`contextgraph.store.nowrite`): a sync answered without
SQLAlchemy (:mod:`contextgraph.sync.unchanged`) takes the same lock as every other sync.

That check may find work to do, and then the CLI runs the full sync in the same process. It can
leave that sync its lock, still held, and what it read under it (:func:`hand_over`): each
source's walk, and its stored files. The next :func:`sync_lock` of the same lock file in this
process takes both over (no other sync can have run between), and the full sync takes those
instead of walking the folders and reading the stored files again (:func:`handed_scan`). The
lock file is known by its device and inode, not by how a path spells it, so a sync that names
the database otherwise still takes the lock it already holds.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from contextgraph.errors import SyncInProgress
from contextgraph.store import nowrite

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from typing import Any

    from contextgraph.sync.scan import ScanResult

    # A source walked under the lock: the walk, its seconds (with the stored rows' read), and
    # the source's stored rows then (id, path, kind, size, mtime_ns, hash: stored_files' query).
    Walk = tuple[ScanResult, float, list[tuple[Any, ...]]]

_thread_lock = threading.Lock()


@dataclass
class _Handed:
    """A held lock and the scans made under it, left for the next sync of its database."""

    fd: int  # the lock file, open and locked
    exclude: list[Path]  # what the scans left out: the database's own files
    scans: dict[tuple[int, str], Walk] = field(default_factory=dict)  # by (source id, root)


_handed: _Handed | None = None  # left by hand_over, until the next sync_lock of its file
_taken: _Handed | None = None  # what the sync holding the lock now took over


@contextmanager
def sync_lock(
    db_path: Path | None, *, wait: bool = True, waiting: Callable[[], object] | None = None
) -> Iterator[None]:
    """Hold the one-sync-per-database lock (an advisory file lock the OS frees on any exit).

    ``waiting``: while another sync holds the lock, called between tries; it returns when the
    next try is due (it paces them) or raises to give up (a watcher told to stop). Without it
    the wait blocks until the lock is free."""
    if db_path is None:
        acquired = _thread_lock.acquire(blocking=wait and waiting is None)
        while not acquired and wait and waiting is not None:
            waiting()
            acquired = _thread_lock.acquire(blocking=False)
        if not acquired:
            nowrite.check("wait for another sync")
            raise SyncInProgress("a sync is already running on this database")
        try:
            yield
        finally:
            _thread_lock.release()
        return
    global _taken
    fd = _open(db_path)
    taken = None
    try:
        taken = _taken = _take_over(fd)
        if taken is None:
            _lock(fd, wait=wait, waiting=waiting)
        yield
    finally:
        _taken = None
        if taken is not None:
            os.close(taken.fd)
        os.close(fd)  # closing releases the lock


def lock_file(db_path: Path, *, wait: bool) -> int:
    """Open ``db_path``'s lock file and take the lock; return the descriptor, whose closing
    releases it."""
    fd = _open(db_path)
    try:
        _lock(fd, wait=wait)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(db_path: Path) -> int:
    return os.open(db_path.with_name(db_path.name + ".sync.lock"), os.O_RDWR | os.O_CREAT, 0o644)


def _lock(fd: int, *, wait: bool, waiting: Callable[[], object] | None = None) -> None:
    try:
        if wait and waiting is not None:
            while not try_flock(fd):
                waiting()
            return
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError as exc:
        nowrite.check("wait for another sync")
        raise SyncInProgress("a sync is already running on this database") from exc


def try_flock(fd: int) -> bool:
    """Take the exclusive file lock of ``fd`` if no other process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def hand_over(fd: int, exclude: list[Path], scans: dict[tuple[int, str], Walk]) -> None:
    """Leave the lock held through ``fd`` (from :func:`lock_file`), and ``scans``, made under it
    with ``exclude`` left out, to the next :func:`sync_lock` of its file in this process."""
    global _handed
    drop_handed()
    _handed = _Handed(fd, exclude, scans)


def drop_handed() -> None:
    """Release a lock left by :func:`hand_over` that no sync took over."""
    global _handed
    if _handed is not None:
        fd, _handed = _handed.fd, None
        os.close(fd)


def handed_scan(source_id: int, root: Path, exclude: list[Path]) -> Walk | None:
    """The walk of a source (with its seconds and the stored rows read then) that the sync
    holding the lock took over, if it was made with the same ``exclude``; each is given once."""
    if _taken is None or _taken.exclude != exclude:
        return None
    return _taken.scans.pop((source_id, str(root)), None)


def _take_over(fd: int) -> _Handed | None:
    global _handed
    if _handed is None or not _same_file(fd, _handed.fd):
        return None
    taken, _handed = _handed, None
    return taken


def _same_file(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def database_files(db_path: Path | None) -> list[Path]:
    """The database file and the files SQLite and the sync keep beside it: never a source's."""
    if db_path is None:
        return []
    suffixes = ("", "-wal", "-shm", "-journal", ".sync.lock")
    return [db_path.with_name(db_path.name + s) for s in suffixes]


__all__ = [
    "database_files",
    "drop_handed",
    "hand_over",
    "handed_scan",
    "lock_file",
    "sync_lock",
    "try_flock",
]
