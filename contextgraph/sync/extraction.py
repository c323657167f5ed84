"""Which process extracts a sync's files, and how their results reach the writer (SPEC §3, §12).

A sync reads and extracts few files in its own process; more (:data:`POOL_THRESHOLD`) in a
pool of worker processes (:mod:`contextgraph.sync.workers`), whose results come back in job
order. One :class:`Extraction` serves all the folders of a sync, each taking its own jobs'
results in turn. A sync into an empty store knows during its scan that the pool will be needed
and starts it then (:meth:`Extraction.early_start`). A CLI sync into a database yet to be
created knows it before it loads the library, and starts the pool even earlier
(:func:`prestart`), for the sync to take over.

This module loads no multiprocessing: a sync without a pool never imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

from contextgraph.settings import Settings

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from contextgraph.sync.ingest import Job, Prepared

POOL_THRESHOLD = 400  # files to extract before a process pool pays for its start-up
_prestarted: ProcessPoolExecutor | None = None  # by prestart, for the next round that needs one


def prestart(settings: Settings) -> bool:
    """Start the worker pool of a sync to come; True if one was started.

    For the CLI: a sync into a database yet to be created, of folders that hold enough files
    for a pool, will need one. Started before the library loads, its workers start while the
    CLI imports, not once the sync's scan has begun. The first round that needs a pool takes
    this one (:meth:`Extraction.start_pool`, :meth:`Extraction.begin`);
    :func:`drop_prestarted` shuts down one that none took.
    """
    global _prestarted
    if _prestarted is not None:
        return False
    _prestarted = _started_pool(settings)
    return _prestarted is not None


def drop_prestarted() -> None:
    """Shut down a pool :func:`prestart` started that no round took over."""
    pool = _take_prestarted()
    if pool is not None:
        pool.shutdown(cancel_futures=True)


def _started_pool(settings: Settings) -> ProcessPoolExecutor | None:
    """A worker pool started now, of :func:`pool_size`'s workers; None where there are none."""
    workers, _ = pool_size(settings.workers, os.cpu_count() or 1)
    if not workers:
        return None
    from contextgraph.sync.workers import started_pool

    return started_pool(workers)


def _take_prestarted() -> ProcessPoolExecutor | None:
    global _prestarted
    pool, _prestarted = _prestarted, None
    return pool


class Extraction:
    """What the jobs hold, extracted in job order (:func:`_prepare_all`): one round, in one
    pool, for every source of a sync, each taking its own jobs' results in turn. Leaving the
    ``with`` block ends the round: its worker processes, if any, exit."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.notes: list[str] = []  # about the extraction as a whole (no worker usable)
        self._results: Iterator[Prepared] = iter(())
        self._pool: ProcessPoolExecutor | None = None  # started before the jobs were known

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
        if jobs:
            pool, self._pool = self._pool, None
            if pool is None and len(jobs) >= POOL_THRESHOLD:
                pool = _take_prestarted()
            self._results = iter(_prepare_all(jobs, self.settings, self.notes, pool))

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


def _prepare_all(
    jobs: list[Job], settings: Settings, notes: list[str], pool: ProcessPoolExecutor | None = None
) -> Iterable[Prepared]:
    """The jobs' results in job order: from worker processes for a large sync, or when ``pool``
    (started early, which this round then owns) is given; else extracted in this process."""
    from contextgraph.sync.ingest import prepare  # only when there is something to read

    workers, helpers = pool_size(settings.workers, os.cpu_count() or 1)
    if workers and (pool is not None or len(jobs) >= POOL_THRESHOLD):
        from contextgraph.sync.workers import prepare_in_pool  # multiprocessing: a large sync

        # notes: why no worker was usable
        return prepare_in_pool(jobs, workers, notes.append, helpers, pool)
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
