"""Which process extracts a sync's files, and how their results reach the writer (SPEC §3, §12).

A sync reads and extracts few files in its own process; more (:data:`POOL_THRESHOLD`) in a
pool of worker processes (:mod:`contextgraph.sync.workers`), whose results come back in job
order. One :class:`Extraction` serves all the folders of a sync, each taking its own jobs'
results in turn. A sync into an empty store knows during its scan that the pool will be needed
and starts it then (:meth:`Extraction.early_start`). A CLI sync into a database yet to be
created knows it before it loads the library, and starts the pool even earlier
(:func:`prestart`), for the sync to take over. It also knows every file such a sync will read
(all it finds), so it walks the folders then and hands the pool their jobs at once: the workers
extract while this process imports the library and creates the database, and the sync takes
the walks (:func:`prescanned`) and, when its jobs are those, their results (:meth:`begin`).

This module loads no multiprocessing: a sync without a pool never imports it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from contextgraph.settings import Settings

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from contextgraph.sync.ingest import Job, Prepared
    from contextgraph.sync.scan import ScanResult

POOL_THRESHOLD = 400  # files to extract before a process pool pays for its start-up


@dataclass
class _Head:
    """What :func:`prestart` did ahead of a sync: its pool, the jobs it gave the pool (with
    their chunks' results to come) and the walks they came from, by real root."""

    pool: ProcessPoolExecutor
    taken: bool = False  # a round took the pool over (and shuts it down)
    jobs: list[Job] = field(default_factory=list)
    futures: list[Future[list[Prepared]]] = field(default_factory=list)
    walks: dict[str, tuple[ScanResult, float]] = field(default_factory=dict)  # with seconds
    exclude: list[Path] = field(default_factory=list)  # what the walks left out


_head: _Head | None = None  # by prestart, for the next round that needs a pool


def prestart(settings: Settings, roots: Sequence[Path] = (), exclude: Sequence[Path] = ()) -> bool:
    """Start the worker pool of a sync to come, and its extraction of ``roots``; True if a pool
    was started.

    For the CLI: a sync into a database yet to be created, of folders that hold enough files
    for a pool, will need one. Started before the library loads, its workers start while the
    CLI imports, not once the sync's scan has begun. The first round that needs a pool takes
    this one (:meth:`Extraction.start_pool`, :meth:`Extraction.begin`);
    :func:`drop_prestarted` shuts down one that none took.

    Into an empty store a sync reads every file its walk finds, so the folders ``roots`` are
    walked now (leaving out ``exclude``: the database's files) and every file found goes to the
    pool at once, in the order the sync's sources take them (by name: a folder's own). The
    sync takes the walks over (:func:`prescanned`), and the results if its jobs are these
    (:meth:`Extraction.begin`); otherwise (another process filled the store meanwhile, other
    settings) they are dropped, and the sync extracts its own.
    """
    global _head
    if _head is not None:
        return False
    pool = _started_pool(settings)
    if pool is None:
        return False
    _head = _Head(pool, exclude=list(exclude))
    if roots:
        _extract_ahead(_head, settings, roots)
    return True


def _extract_ahead(head: _Head, settings: Settings, roots: Sequence[Path]) -> None:
    from contextgraph.sync.ingest import read_job
    from contextgraph.sync.scan import scan
    from contextgraph.sync.workers import submit_chunks

    for root in sorted({os.path.realpath(r) for r in roots}, key=lambda r: (Path(r).name, r)):
        started = time.perf_counter()
        walk = scan(Path(root), exclude=head.exclude)
        head.walks[root] = walk, time.perf_counter() - started
        head.jobs += [read_job(f, None, settings, root) for f in walk.files]
    head.futures = submit_chunks(head.pool, head.jobs)


def prescanned(root: Path, exclude: list[Path]) -> tuple[ScanResult, float] | None:
    """The walk of ``root`` that :func:`prestart` made, and its seconds, if it left out the same
    ``exclude``; each is given once. Only a sync into an empty store may take it: one that
    finds files stored (another process synced meanwhile) drops it (:func:`drop_prestarted`),
    as a walk made before its lock would take for gone a file stored since."""
    if _head is None or _real(_head.exclude) != _real(exclude):
        return None
    return _head.walks.pop(os.path.realpath(root), None)


def _real(paths: Sequence[Path]) -> list[str]:
    return [os.path.realpath(p) for p in paths]


def drop_prestarted() -> None:
    """Forget what :func:`prestart` began: its chunks not yet begun are cancelled, and its pool,
    if no round took it over, shut down without waiting (a worker ends once its chunk is done)."""
    global _head
    head, _head = _head, None
    if head is not None:
        _drop(head)


def _drop(head: _Head) -> None:
    for future in head.futures:
        future.cancel()
    if not head.taken:
        head.pool.shutdown(wait=False, cancel_futures=True)


def _started_pool(settings: Settings) -> ProcessPoolExecutor | None:
    """A worker pool started now, of :func:`pool_size`'s workers; None where there are none."""
    workers, _ = pool_size(settings.workers, os.cpu_count() or 1)
    if not workers:
        return None
    from contextgraph.sync.workers import started_pool

    return started_pool(workers)


def _take_prestarted() -> ProcessPoolExecutor | None:
    """The pool :func:`prestart` started, once; the extraction it began stays to be claimed
    (:func:`_claim_ahead`)."""
    if _head is None or _head.taken:
        return None
    _head.taken = True
    return _head.pool


def _claim_ahead(
    jobs: list[Job], pool: ProcessPoolExecutor | None
) -> list[Future[list[Prepared]]] | None:
    """The futures of the extraction :func:`prestart` began, if it was of exactly ``jobs`` and
    ``pool`` is its pool; else None, and what it began is cancelled (a chunk already running is
    left to end). Either way it is claimed: asked once."""
    global _head
    head, _head = _head, None
    if head is None:
        return None
    if head.futures and head.jobs == jobs and pool is head.pool:
        return head.futures
    _drop(head)
    return None


class Extraction:
    """What the jobs hold, extracted in job order (:func:`_prepare_all`): one round, in one
    pool, for every source of a sync, each taking its own jobs' results in turn. Leaving the
    ``with`` block ends the round: its worker processes, if any, exit."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.notes: list[str] = []  # about the extraction as a whole (no worker usable)
        self._results: Iterator[Prepared] = iter(())
        self._pool: ProcessPoolExecutor | None = None  # started before the jobs were known
        self._round_pool: ProcessPoolExecutor | None = None  # that pool, once begin used it
        self._ahead: list[Future[list[Prepared]]] = []  # the prestart's chunks begin claimed

    def early_start(self) -> tuple[int, Callable[[], None]]:
        """(files, call): a scan that has found that many files calls :meth:`start_pool`."""
        return POOL_THRESHOLD, self.start_pool

    def start_pool(self) -> None:
        """Start the worker pool now, before :meth:`begin` (a cold load that found enough
        files: the workers start while the scan goes on)."""
        if self._pool is None:
            self._pool = _take_prestarted() or _started_pool(self.settings)

    def begin(self, jobs: list[Job]) -> None:
        """Start extracting ``jobs`` (in the pool started early, if any)."""
        if not jobs:
            drop_prestarted()  # nothing to read: what a prestart began is of no use
            return
        pool, self._pool = self._pool, None
        if pool is None and len(jobs) >= POOL_THRESHOLD:
            pool = _take_prestarted()
        ahead = _claim_ahead(jobs, pool)
        self._round_pool, self._ahead = pool, ahead or []
        self._results = iter(_prepare_all(jobs, self.settings, self.notes, pool, ahead))

    def take(self, count: int) -> Iterator[Prepared]:
        """The results of the next ``count`` jobs."""
        return islice(self._results, count)

    def __enter__(self) -> Extraction:
        return self

    def __exit__(self, *exc: object) -> None:
        close = getattr(self._results, "close", None)  # a pool's generator; an in-process map
        if close is not None:
            close()
        if self._pool is not None:  # started, and no jobs took it over (none, or an error)
            self._pool.shutdown(cancel_futures=True)
        if self._round_pool is not None:
            # Shut down by the pool's generator when it ran; one never read (the sync failed
            # before its first file) would leave every chunk given to it to run before exit.
            # The chunks the prestart gave it are cancelled here, at once: the pool's manager
            # thread cancels the others later, and a chunk already running ends on its own.
            for future in self._ahead:
                future.cancel()
            self._round_pool.shutdown(wait=False, cancel_futures=True)


def _prepare_all(
    jobs: list[Job],
    settings: Settings,
    notes: list[str],
    pool: ProcessPoolExecutor | None = None,
    ahead: list[Future[list[Prepared]]] | None = None,
) -> Iterable[Prepared]:
    """The jobs' results in job order: from worker processes for a large sync, or when ``pool``
    (started early, which this round then owns) is given; else extracted in this process.
    ``ahead``: ``pool``'s futures of the jobs' chunks, given to it already (:func:`prestart`)."""
    from contextgraph.sync.ingest import prepare  # only when there is something to read

    workers, helpers = pool_size(settings.workers, os.cpu_count() or 1)
    if workers and (pool is not None or len(jobs) >= POOL_THRESHOLD):
        from contextgraph.sync.workers import prepare_in_pool  # multiprocessing: a large sync

        # notes: why no worker was usable
        return prepare_in_pool(jobs, workers, notes.append, helpers, pool, ahead)
    return map(prepare, jobs)


MAX_WORKERS = 4  # the default pool's size on a machine of many cores


def pool_size(workers: int, cores: int) -> tuple[int, int]:
    """(worker processes, helpers) for a large extraction; no workers means extract in this
    process.

    ``workers`` is the setting: 1 extracts in-process, more is that many workers and no
    helper. By default (0) there is one worker per core but one, at most :data:`MAX_WORKERS`,
    and one helper: this process writes every batch meanwhile, and where its writes bound the
    sync (a cold load of bench's 13,415 notes) a worker that took its core would slow it down.
    Where the extraction bounds it instead (notes that need a full markdown parse, code), this
    process waits for files, and the helper extracts, only then, files the workers have not
    started (:func:`~contextgraph.sync.workers.prepare_in_pool`): three copies of the real
    corpora (12,411 notes) and pydantic's tree load faster, bench's vault as fast. A single
    core extracts in this process.
    """
    if workers:
        return (workers, 0) if workers > 1 else (0, 0)
    if cores < 2:
        return 0, 0
    return min(MAX_WORKERS, cores - 1), 1


__all__ = [
    "MAX_WORKERS",
    "POOL_THRESHOLD",
    "Extraction",
    "drop_prestarted",
    "pool_size",
    "prestart",
]
