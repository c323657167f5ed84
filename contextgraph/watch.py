"""Keep the store in step with the source folders as files change (SPEC §14).

A :class:`Watcher` watches the root of every registered source with ``watchfiles`` (Rust
``notify``: inotify, FSEvents, ReadDirectoryChangesW). Changes are debounced into batches:
``watchfiles`` yields once the folder has been quiet for ``step_ms`` (or ``debounce_ms`` have
passed), so an editor's save — a temporary file renamed over the note — arrives as one batch,
and a burst of a thousand new files arrives as one or a few. Each batch is synced per source
with :func:`contextgraph.sync.run.sync_paths`: the same incremental code as ``sync``, under the
one-sync lock, so a rename (both paths in one batch) is a rename, and a folder among the paths
(created, deleted, moved, or a ``git checkout``) is a full sync of its source.

Each watch begins with a full sync of every source (a sync that finds nothing to do costs a
walk), made once the folders are watched, so a change during it arrives as an event too; and
every :data:`RESCAN_SECONDS` the watch starts again, so what no event told (an overflow of the
kernel's queue, a note reached through a link to another) is synced within minutes.

One watcher per database: a second one (another terminal, another MCP server with ``--watch``)
stands by on ``<database>.watch.lock`` (on PostgreSQL, a session-level advisory lock:
:func:`contextgraph.store.pglock.watch_lock`) and takes over, after a catch-up sync, if the
first stops — so no change is synced twice. A source whose folder is deleted is set aside until the
folder is back, then synced in full. :meth:`Watcher.run` returns when its stop event is set;
the caller decides which signals set it (the CLI: SIGTERM and Ctrl-C). With the precompute of
BuildContext's lists on (``weights_min_notes``), a watcher also refreshes them when the day turns
(:func:`contextgraph.graph.weights.refresh_when_due`, checked once a minute).
"""

from __future__ import annotations

import logging
import math
import os
import stat
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import watchfiles

from contextgraph.api import ContextGraph
from contextgraph.errors import ContextGraphError, DatabaseError
from contextgraph.graph import weights
from contextgraph.store import db
from contextgraph.store.dialect import is_postgresql
from contextgraph.store.sources import SourceInfo, list_sources
from contextgraph.sync.lock import try_flock
from contextgraph.sync.run import SyncReport, run_sync, sync_paths

log = logging.getLogger(__name__)

WEIGHTS_CHECK_SECONDS = 60.0  # how often a watcher asks whether the precomputed lists are due
RESCAN_SECONDS = 300.0  # how often a watcher syncs every source in full, whatever it was told
LOCK_TRY_SECONDS = 0.1  # how often a watcher's sync tries the lock another sync holds


def _identity(folder: str) -> tuple[int, int] | None:
    """(device, inode) of ``folder``; None when it is not a folder (any more)."""
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


class _Stopped(BaseException):
    """Raised from a sync's progress once the watcher's stop is set (past ``except Exception``,
    which keeps a watcher alive through one bad batch)."""


@dataclass(frozen=True)
class Batch:
    """One synced batch of changes: which source, how many paths, what the sync did."""

    source: str
    paths: int
    report: SyncReport


class Watcher:
    """Watch every registered source of ``graph`` and sync what changes."""

    def __init__(
        self,
        graph: ContextGraph,
        *,
        debounce_ms: int = 1600,
        step_ms: int = 100,
        poll_seconds: float = 1.0,
        rescan_seconds: float = RESCAN_SECONDS,
        on_batch: Callable[[Batch], None] | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        db.check_writable(graph.engine, "watch folders for changes")
        self.graph = graph
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.poll_seconds = poll_seconds
        self.rescan_seconds = rescan_seconds
        self.on_batch = on_batch
        self.on_state = on_state or (lambda message: log.info("%s", message))
        self._weights_checked = -math.inf  # time.monotonic() of the last weights check
        self._stop = threading.Event()  # run's own, once it runs
        # The database file opened (path, device, inode), and why the watch ended if it was
        # replaced or removed meanwhile (see _check_file).
        path = graph.database_path
        self._file = None if path is None else db.file_identity(path)
        self.gone: str | None = None
        # Per source, the paths of batches whose sync failed: retried with the next batch of
        # that source, or at the next poll (a locked or full disk passes; an event does not
        # come again).
        self._failed: dict[str, set[str]] = defaultdict(set)
        # Per source name, the root watched and its (device, inode) when the watch began.
        self._watched: dict[str, tuple[str, tuple[int, int] | None]] = {}
        self._missing: set[str] = set()  # the sources whose folder is gone, as last said

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set (standing by first while another watcher is active).

        A sync under way when ``stop`` is set stops at its next file, as a killed one would
        (what it has not committed is left to the next sync), not when it would have ended:
        a service manager's stop timeout is seconds, a catch-up can take minutes. A sync that
        waits for another process's sync to end stops waiting."""
        self._stop = stop
        try:
            self._run(stop)
        except _Stopped:
            return

    def _run(self, stop: threading.Event) -> None:
        with self._watch_lock(stop) as active:
            if not active:
                return
            while not stop.is_set():
                sources = self._sources()
                live = {s for s in sources if s.root.is_dir()}
                self._say_missing([s for s in sources if s not in live])
                if not live:
                    self.refresh_weights(time.monotonic())
                    stop.wait(self.poll_seconds)
                    continue
                self._watch(live, sources, stop)

    def _watch(
        self, live: set[SourceInfo], sources: list[SourceInfo], stop: threading.Event
    ) -> None:
        """Sync batches until a source appears, disappears or comes back, or until the next
        rescan is due (:data:`RESCAN_SECONDS`); then return, for a catch-up of every source.

        The rescan heals what no event told: the kernel's queue of events overflowed (a burst
        of many thousand files while the watcher was stopped or starved; ``watchfiles`` drops
        the overflow notice), a file reached through a link to another. A path the watcher
        cannot decode (a name that is not UTF-8, ``watchfiles`` raises) ends the watch the
        same way, after a pause, instead of the watcher."""
        roots = {os.path.realpath(s.root): s for s in live}
        self._watched = {source.name: (root, _identity(root)) for root, source in roots.items()}
        names = ", ".join(sorted(s.name for s in live))
        armed = last_check = time.monotonic()
        behind = True  # every source is caught up once the folders are watched, not before
        try:
            for changes in watchfiles.watch(
                *roots,
                watch_filter=None,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                rust_timeout=max(100, int(self.poll_seconds * 1000)),
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                if behind:
                    # Watched since the first step, so what changes during the catch-up comes as
                    # events too: no change falls between this watch and the last one.
                    behind = False
                    for source in sorted(live, key=lambda s: s.name):
                        self._catch_up(source)
                    self.on_state(f"watching {names}")
                if changes and self._apply(changes, roots):
                    return
                now = time.monotonic()
                if now - last_check >= self.poll_seconds:
                    last_check = now
                    self._check_file()
                    for name in sorted(self._failed):  # _sync takes them from the dict
                        if not self._sync(name, set()):
                            return  # its root went away: catch up once it is back
                    self.refresh_weights(now)
                    if self._layout_changed(live, sources):
                        return
                if now - armed >= self.rescan_seconds:
                    return
        except RuntimeError as exc:
            if type(exc).__name__ != "WatchfilesRustInternalError":  # (in a private module)
                raise
            reason = " ".join(str(exc).split())[:300]
            self.on_state(f"watching stopped ({reason}): catching up, then watching again")
            stop.wait(self.poll_seconds)  # not a loop at full speed while the cause stays

    def _say_missing(self, missing: list[SourceInfo]) -> None:
        """Say once which sources' folders are gone (a sync says it each time): their files
        stay stored, as a sync keeps them, and are watched again once the folder is back."""
        for source in sorted(missing, key=lambda s: s.name):
            if source.name not in self._missing:
                self.on_state(
                    f"the folder of source {source.name!r} ({source.root}) is gone: its files"
                    " stay stored, and it is watched again once the folder is back"
                )
        self._missing = {s.name for s in missing}

    def refresh_weights(self, now: float) -> None:
        """Recompute BuildContext's precomputed lists when the day turned (at most once a minute).

        ``now`` is ``time.monotonic()``. Only when the precompute is on (``weights_min_notes``);
        the syncs of changed files refresh them already when the graph changes."""
        if now - self._weights_checked < WEIGHTS_CHECK_SECONDS:
            return
        self._weights_checked = now
        try:
            weights.refresh_when_due(self.graph.engine, self.graph.settings)
        except Exception as exc:  # the next check (or sync) tries again
            log.exception("refreshing the precomputed relation weights failed")
            self.on_state(f"weights refresh failed: {type(exc).__name__}: {exc}")

    def _apply(
        self, changes: set[tuple[watchfiles.Change, str]], roots: dict[str, SourceInfo]
    ) -> bool:
        """Sync one batch; True when a watched root itself went away."""
        per_source: dict[str, set[str]] = defaultdict(set)
        root_gone = False
        for _change, path in changes:
            for root, source in roots.items():
                if path == root:
                    root_gone = root_gone or not os.path.isdir(root)
                    break
                if path.startswith(root + os.sep):
                    rel = os.path.relpath(path, root).replace(os.sep, "/")
                    if not any(part.startswith(".") for part in rel.split("/")):
                        per_source[source.name].add(rel)
                    break
        for name, rels in sorted(per_source.items()):
            root_gone = not self._sync(name, rels) or root_gone
        return root_gone

    def _sync(self, name: str, rels: set[str]) -> bool:
        """Sync one source's changed paths, with those of its batches that failed before;
        False, syncing nothing, when its root is no longer the folder watched.

        The OS goes on reporting changes inside a watched folder under its old path after the
        folder was renamed or moved: synced, they would retract files that still exist (and
        their read history). The catch-up that follows sets such a source aside until its
        folder is back, as a sync would. Read again even where size and mtime match what is
        stored: the watcher was told these files changed, and two saves within one tick of a
        coarse clock (FAT, SMB) leave both alike (``reread``)."""
        self._check_file()
        rels = rels | self._failed.pop(name, set())
        root, identity = self._watched.get(name, (None, None))
        if root is not None and _identity(root) != identity:
            return False
        try:
            report = sync_paths(
                self.graph.engine,
                self.graph.settings,
                name,
                rels,
                reread=True,
                progress=self._go_on,
                waiting=self._wait_for_lock,
            )
        except Exception as exc:  # a watcher outlives one bad batch, and tries it again
            log.debug("syncing %d changed path(s) of %s failed", len(rels), name, exc_info=True)
            self._failed[name] |= rels
            self.on_state(f"sync of {name} failed: {self._reason(exc)}; trying again")
            return True
        if self.on_batch is not None:
            self.on_batch(Batch(name, len(rels), report))
        return True

    def _catch_up(self, source: SourceInfo) -> None:
        """A full sync of a source: what changed while nobody watched it."""
        self._check_file()
        try:
            report = run_sync(
                self.graph.engine,
                self.graph.settings,
                sources=[source.name],
                progress=self._go_on,
                waiting=self._wait_for_lock,
            )
        except Exception as exc:  # the next catch-up (a rescan) tries again
            log.debug("catch-up sync of %s failed", source.name, exc_info=True)
            self.on_state(f"catch-up sync of {source.name} failed: {self._reason(exc)}")
            return
        if self.on_batch is not None:
            self.on_batch(Batch(source.name, report.scanned, report))

    def _reason(self, exc: Exception) -> str:
        """One line on why a sync failed: our error's message, or the driver's first line (not
        the SQL statement, nor SQLAlchemy's link)."""
        mapped = db.translate(self.graph.engine, exc)
        if isinstance(mapped, ContextGraphError):
            return str(mapped)
        first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__

    def _check_file(self) -> None:
        """End the watch (:attr:`gone` says why) once the database file opened was replaced
        or removed: its syncs went into a file nobody would read again, and what the folder
        held never reached the one there now. Not reopened, as the MCP server does not: a
        ``-wal`` the old file left behind would be read as the new one's."""
        if self._file is None:
            return
        try:
            gone = db.gone_from(self._file)
        except OSError:
            return  # cannot tell now (a folder made unreadable): the sync says what is wrong
        if gone is None:
            return
        self.gone = (
            f"the database file {self._file[0]} was {gone} while it was watched: start the "
            "watch again to use the one there now"
        )
        self.on_state(self.gone)
        raise _Stopped

    def _go_on(self, _done: int, _total: int) -> None:
        """A sync's progress, after each file: where a stop cuts it short."""
        if self._stop.is_set():
            raise _Stopped

    def _wait_for_lock(self) -> None:
        """Between a sync's tries of the lock another sync holds: a stop ends the wait."""
        if self._stop.wait(LOCK_TRY_SECONDS):
            raise _Stopped

    def _sources(self) -> list[SourceInfo]:
        with db.read(self.graph.engine) as conn:
            return list_sources(conn)

    def _layout_changed(self, live: set[SourceInfo], sources: list[SourceInfo]) -> bool:
        """A source registered or removed, a watched root gone, or a missing root back."""
        now = self._sources()
        if {(s.name, s.root) for s in now} != {(s.name, s.root) for s in sources}:
            return True
        return {s for s in now if s.root.is_dir()} != live

    # -- one watcher per database ------------------------------------------------------------

    @contextmanager
    def _watch_lock(self, stop: threading.Event) -> Iterator[bool]:
        """Hold the database's watcher lock; stand by until it is free (False: stopped first)."""
        with self._lock_tries() as try_lock:
            told = False
            while not try_lock():
                if not told:
                    self.on_state("another watcher is active on this database: standing by")
                    told = True
                if stop.wait(min(self.poll_seconds, 0.5)):
                    yield False
                    return
            if told:
                self.on_state("the other watcher stopped: taking over")
            yield True

    @contextmanager
    def _lock_tries(self) -> Iterator[Callable[[], bool]]:
        """How to try this database's watcher lock: ``<database>.watch.lock`` beside an SQLite
        file, a session-level advisory lock on a PostgreSQL server, none in memory."""
        if is_postgresql(self.graph.engine):
            from contextgraph.store.pglock import watch_lock

            with watch_lock(self.graph.engine) as try_lock:
                yield try_lock
            return
        path = self.graph.database_path
        if path is None:
            yield lambda: True
            return
        lock = Path(f"{path}.watch.lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise DatabaseError(f"cannot open {lock}: {exc.strerror or exc}") from exc
        try:
            yield lambda: try_flock(fd)
        finally:
            os.close(fd)  # closing releases the lock
