"""Sync (SPEC §3): bring the store exactly to what a from-scratch sync of the files would give.

Per source: scan, compare size and mtime_ns with the store, read and hash what changed, extract
(in a process pool when there is much to do; into an empty store, started while the scan goes
on), then write in short ``BEGIN IMMEDIATE`` batches.
A sync of several sources scans them all first and extracts their files in one round (one
pool), which each source's batches then take their files from in turn.
Each batch moves a set of files wholly from their old state to their new one, so a sync killed at
any instant leaves a consistent store, and the files it did not reach still look changed to the
next sync. Derived state that spans files (the code graph of a source, the communities) is marked
stale inside the batch that changes its inputs and recomputed at the end, so it converges too.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, delete

from contextgraph.errors import NotFound
from contextgraph.graph.stats import counts
from contextgraph.settings import Settings
from contextgraph.store import checkpoint, db, meta, nowrite
from contextgraph.store.dialect import INDEXED_TEXT_MAX_BYTES, fits_index, is_postgresql
from contextgraph.store.models import T_SOURCES
from contextgraph.store.sources import SourceInfo, list_sources
from contextgraph.sync import coldload
from contextgraph.sync.apply import (
    Delete,
    Existing,
    FileOp,
    Insert,
    Rename,
    Stat,
    Update,
    apply_ops,
    existing_of,
    stored_files,
    stored_under,
)
from contextgraph.sync.extraction import Extraction, drop_prestarted, prescanned
from contextgraph.sync.lock import database_files, handed_scan, sync_lock
from contextgraph.sync.report import Problem, SyncReport
from contextgraph.sync.scan import ScannedFile, pick, scan
from contextgraph.sync.starting import refuse_while_starting
from contextgraph.sync.unchanged import may_read_refusing

if TYPE_CHECKING:
    from contextgraph.sync.ingest import Job, Prepared

Progress = Callable[[int, int], None]


def lock_database(
    engine: Engine, *, wait: bool = True, waiting: Callable[[], object] | None = None
) -> AbstractContextManager[None]:
    """The one-sync-per-database lock of ``engine``'s database.

    SQLite: the advisory file lock of :func:`sync_lock`. PostgreSQL: a session-level advisory
    lock on the server (:func:`contextgraph.store.pglock.sync_lock`), freed when its session ends.
    ``waiting`` paces the tries while another sync holds it, or raises to give up.
    """
    refuse_while_starting("sync or write notes")  # never wait for a lock our parent holds
    wait = wait and not nowrite.active()  # a run that may not write never waits for the lock
    if is_postgresql(engine):
        from contextgraph.store.pglock import sync_lock as server_lock

        return server_lock(engine, wait=wait, waiting=waiting)
    return sync_lock(db.database_path(engine), wait=wait, waiting=waiting)


def run_sync(
    engine: Engine,
    settings: Settings,
    *,
    sources: Sequence[str] | None = None,
    wait: bool = True,
    progress: Progress | None = None,
    waiting: Callable[[], object] | None = None,
) -> SyncReport:
    """Sync the named sources (all registered ones by default) and recompute what went stale.

    ``waiting``: see :func:`lock_database`."""
    report = SyncReport()
    db_path = db.database_path(engine)
    started = time.perf_counter()
    with lock_database(engine, wait=wait, waiting=waiting):
        report.phases["lock"] = time.perf_counter() - started
        with db.read(engine) as conn:
            registered = list_sources(conn)
            unfinished = coldload.is_deferred(conn)  # a cold load was killed
        if unfinished:
            coldload.finish(engine, settings.lock_retry_seconds)
        chosen = [s for s in registered if sources is None or s.name in sources]
        exclude = database_files(db_path)
        deferred = False  # a cold load's dropped objects are yet to be recreated
        with Extraction(settings) as round_:
            # Into an empty store every file found is read: once a scan has found enough for
            # a pool, its workers start while the scan goes on (not where no file may be read
            # beyond a few: a resident server's sync hands such a sync back).
            early = None
            if not nowrite.active() and coldload.store_is_empty(engine):
                early = round_.early_start()
            else:  # what a prestart walked and began before this lock: an empty store's only
                drop_prestarted()
            plans = [_plan(engine, settings, source, exclude, report, early) for source in chosen]
            round_.begin([job for plan in plans for job in plan.jobs])
            for plan in plans:
                report.sources.append(plan.source.name)
                deferred = _reconcile(engine, settings, plan, report, progress, round_, deferred)
        _finish(engine, settings, registered, report, deferred=deferred)
    handed = sum(plan.handed_seconds for plan in plans)
    report.phases["total"] = time.perf_counter() - started + handed
    return report


def sync_paths(
    engine: Engine,
    settings: Settings,
    source: str,
    paths: Iterable[str],
    *,
    wait: bool = True,
    locked: bool = False,
    reread: bool = False,
    progress: Progress | None = None,
    waiting: Callable[[], object] | None = None,
) -> SyncReport:
    """Sync only ``paths`` (source-relative, files or folders) of one source, as ``run_sync`` would.

    The store ends as a full sync would leave it for those paths: a path gone from disk is
    retracted, a path that is new or changed is read, and a file that moved between two given
    paths is a rename (it keeps ``last_accessed``). A folder among the paths, or a path through
    a symlinked folder, is synced by a full sync of the source, since only a walk decides which
    of its aliases the store holds. Pass ``locked=True`` when the caller already holds
    :func:`sync_lock` (a writer that must change the file and sync it in one critical section),
    and ``reread=True`` when it knows the files changed: two writes within one tick of the file
    system's clock can leave size and mtime alike, so the stat shortcut is skipped (the hash
    still is compared). ``waiting``: see :func:`lock_database`.
    """
    if not locked:
        with lock_database(engine, wait=wait, waiting=waiting):
            return sync_paths(
                engine, settings, source, paths, locked=True, reread=reread, progress=progress
            )
    report = SyncReport()
    started = time.perf_counter()
    with db.read(engine) as conn:
        registered = list_sources(conn)
        unfinished = coldload.is_deferred(conn)  # a cold load was killed
    if unfinished:
        coldload.finish(engine, settings.lock_retry_seconds)
    found = [s for s in registered if s.name == source]
    if not found:
        raise NotFound.source(source)
    info = found[0]
    report.sources.append(info.name)
    exclude = database_files(db.database_path(engine))
    picked = pick(info.root, sorted(set(paths)), exclude)
    if picked is not None:
        files, asked = picked
        with db.read(engine) as conn:
            existing = stored_files(conn, info.id, asked)
            # A path the store knows as a folder, now gone or a file (a folder named like a
            # note, ``Node.js``, moved away): its files are known only to a full sync.
            folded = stored_under(conn, info.id, asked)
        due, linked = _marks(engine, settings, info)
        if folded or due is not None or linked:
            picked = None  # a full sync of the source: see folded, and _marks
    if picked is None:
        plan = _plan(engine, settings, info, exclude, report)
    else:
        problems: list[Problem] = []
        files = _indexable(engine, info, files, problems)
        jobs = _jobs(files, existing, settings, reread, info.root)
        plan = _Plan(info, files=files, existing=existing, jobs=jobs, problems=problems)
    with Extraction(settings) as extraction:
        extraction.begin(plan.jobs)
        deferred = _reconcile(engine, settings, plan, report, progress, extraction)
    _finish(engine, settings, [info], report, deferred=deferred)
    report.phases["total"] = time.perf_counter() - started
    return report


def forget_source(engine: Engine, settings: Settings, source: SourceInfo) -> SyncReport:
    """Remove ``source`` and everything derived from it, as a sync of an empty folder would.

    Its files are retracted in the same short batches a sync uses (so co-occurrence counts and
    orphaned concepts stay exact), its code graph is dropped, then the source row itself; the
    communities are recomputed when the concept graph changed.
    """
    report = SyncReport(sources=[source.name])
    started = time.perf_counter()
    with lock_database(engine):
        with db.read(engine) as conn:
            ops: list[FileOp] = [
                Delete(path, old) for path, old in stored_files(conn, source.id).items()
            ]
            unfinished = coldload.is_deferred(conn)  # a cold load was killed
        if unfinished:
            coldload.finish(engine, settings.lock_retry_seconds)
        for start in range(0, len(ops), settings.batch_files):
            _write_batch(
                engine, settings, source, ops[start : start + settings.batch_files], report
            )
        _rebuild_code_graph(engine, source.id)  # drops the packages only this source imported
        with db.write(engine, retry_seconds=settings.lock_retry_seconds) as conn:
            conn.execute(delete(T_SOURCES).where(T_SOURCES.c.id == source.id))
            meta.forget_source(conn, source.id)
        _finish(engine, settings, [], report)
    report.phases["total"] = time.perf_counter() - started
    return report


def _finish(
    engine: Engine,
    settings: Settings,
    sources: list[SourceInfo],
    report: SyncReport,
    *,
    deferred: bool = False,
) -> None:
    """Recompute what the file phase marked stale (code graphs, communities); count.

    ``deferred``: the last source's cold load has yet to recreate what it dropped
    (:func:`coldload.restore`). That runs in a thread while the communities read, partition and
    store the graph, then the WAL is copied (:func:`checkpoint.meanwhile`); before a code graph is
    rebuilt, or at the end when the communities are current, it runs here.
    """
    restore: Callable[[], None] | None = None
    if deferred:
        restore = partial(coldload.finish, engine, settings.lock_retry_seconds)
    t = time.perf_counter()
    for source in sources:
        if _is_stale(engine, meta.code_graph(source.id)):
            nowrite.check("rebuild a code graph")
            if restore is not None:
                restore()
                restore = None
            _rebuild_code_graph(engine, source.id)
    report.phases["codegraph"] = time.perf_counter() - t
    t = time.perf_counter()
    if _is_stale(engine, meta.COMMUNITIES):
        nowrite.check("detect communities")
        report.graph_changed = True
        first, restore = restore, None
        _recompute_communities(
            engine, settings, report, meanwhile=partial(checkpoint.meanwhile, engine, first)
        )
    if restore is not None:
        restore()
    report.phases["communities"] = time.perf_counter() - t
    t = time.perf_counter()
    _refresh_weights(engine, settings)
    report.phases["weights"] = time.perf_counter() - t
    _count(engine, report)


def _rebuild_code_graph(engine: Engine, source_id: int) -> None:
    # Not at module level: the code graph builder (resolution, tsconfig) is only needed by a
    # sync that changed code, and a no-change sync should not pay for importing it.
    from contextgraph.sync.codesync import rebuild_code_graph

    rebuild_code_graph(engine, source_id)


def _recompute_communities(
    engine: Engine,
    settings: Settings,
    report: SyncReport,
    meanwhile: Callable[[], AbstractContextManager[object]],
) -> None:
    # Not at module level: communities loads igraph (about 0.1 s), which only a sync that changed
    # the concept graph needs; every query command imports this module through the facade.
    from contextgraph.graph import communities

    run = communities.recompute(engine, settings, meanwhile)
    report.communities = run.community_count
    report.modularity = run.modularity


def _refresh_weights(engine: Engine, settings: Settings) -> None:
    """Precompute BuildContext's weight sums when the graph (or a decay setting) changed."""
    if settings.weights_min_notes <= 0:
        return  # off: lists left from before stay exact (they carry their graph version)
    from contextgraph.graph import weights

    if not weights.is_current(engine, settings):
        nowrite.check("precompute weights")
        weights.refresh(engine, settings)


@dataclass
class _Plan:
    """One source scanned: what a sync of it reads (``jobs``) and reports before its batches."""

    source: SourceInfo
    missing: bool = False
    files: list[ScannedFile] = field(default_factory=list)
    existing: dict[str, Existing] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    handed_seconds: float = 0.0  # a scan made before the sync began (_plan), counted in its time
    extraction: str | None = None  # the extraction key to record once the files are applied
    linked: bool | None = None  # whether the walk followed a link, when the store says otherwise


def _plan(
    engine: Engine,
    settings: Settings,
    source: SourceInfo,
    exclude: list[Path],
    report: SyncReport,
    once_found: tuple[int, Callable[[], object]] | None = None,
) -> _Plan:
    """Scan ``source`` and compare it with the store: what its sync will read. ``once_found``
    goes to :func:`~contextgraph.sync.scan.scan`.

    A walk made under this sync's lock before it began (the CLI's check for a sync without
    work, :func:`~contextgraph.sync.lock.handed_scan`) is taken as this sync's own, with the
    source's stored files read then, and its seconds; so is the walk of a new database's folder
    made before the library loaded (:func:`~contextgraph.sync.extraction.prescanned`)."""
    t = time.perf_counter()
    if not source.root.is_dir():
        problem = Problem(source.name, ".", f"source folder {source.root} is missing")
        return _Plan(source, missing=True, problems=[problem])
    seconds = 0.0  # of a walk made before the sync began
    handed = handed_scan(source.id, source.root, exclude)
    if handed is None:
        scanned, seconds = prescanned(source.root, exclude) or (
            scan(source.root, exclude=exclude, once_found=once_found),
            0.0,
        )
        with db.read(engine) as conn:
            existing = stored_files(conn, source.id)
    else:
        scanned, seconds, rows = handed
        existing = existing_of(rows)  # read under the same lock: no sync has written since
        if once_found is not None and len(scanned.files) >= once_found[0]:
            once_found[1]()
    report.phases["scan"] = report.phases.get("scan", 0.0) + time.perf_counter() - t + seconds
    extraction, linked = _marks(engine, settings, source)
    problems = [Problem(source.name, path, reason) for path, reason in scanned.problems]
    files = _indexable(engine, source, scanned.files, problems)
    return _Plan(
        source,
        handed_seconds=seconds,
        files=files,
        existing=existing,
        jobs=_jobs(files, existing, settings, False, source.root, again=extraction is not None),
        problems=problems,
        extraction=extraction,
        linked=scanned.linked if scanned.linked != linked else None,
    )


def _indexable(
    engine: Engine, source: SourceInfo, files: list[ScannedFile], problems: list[Problem]
) -> list[ScannedFile]:
    """``files`` but those whose path the engine cannot index (``fits_index``): ``problems``."""
    kept = [f for f in files if fits_index(engine, f.path)]
    if len(kept) < len(files):
        why = f"path longer than {INDEXED_TEXT_MAX_BYTES:,} bytes: PostgreSQL cannot index it"
        taken = {f.path for f in kept}
        problems += [Problem(source.name, f.path, why) for f in files if f.path not in taken]
    return kept


def _marks(engine: Engine, settings: Settings, source: SourceInfo) -> tuple[str | None, bool]:
    """:meth:`Settings.extraction_key` when ``source``'s files were stored under another one
    (each is then extracted anew, the key recorded), else None; and ``meta.linked``'s flag."""
    with db.read(engine) as conn:
        stored = meta.get(conn, meta.extracted(source.id))
        linked = meta.get(conn, meta.linked(source.id)) is not None
    return (None if stored == settings.extraction_key() else settings.extraction_key()), linked


def _reconcile(
    engine: Engine,
    settings: Settings,
    plan: _Plan,
    report: SyncReport,
    progress: Progress | None,
    extraction: Extraction,
    deferred: bool = False,
) -> bool:
    """Move the store from what it holds of a source to what :func:`_plan` found in it: what is
    in the first only is gone; ``extraction`` holds the results of ``plan.jobs``, next.

    Returns True when the batches ran as a cold load whose dropped indexes and triggers are yet
    to be recreated: the caller restores them (:func:`_finish`) before anything else writes.
    ``deferred``: an earlier folder's cold load in this sync left them dropped. A new folder's
    files load the same way, into the same deferred objects (the four real corpora synced at
    once into a new database: 2.6 → 1.9 s); batches of any other kind get them back first.
    """
    source, files, existing, jobs = plan.source, plan.files, plan.existing, plan.jobs
    report.failed += plan.problems
    if plan.missing:
        report.missing.append(source.name)
        return deferred
    report.scanned += len(files)
    report.unchanged += len(files) - len(jobs)
    present = {f.path for f in files}
    gone = {p: existing[p] for p in sorted(existing.keys() - present)}
    if gone or (jobs and not may_read_refusing(jobs, existing)):
        nowrite.check("read changed files")
    by_hash: dict[tuple[str, str], list[Existing]] = defaultdict(list)
    for path in sorted(gone):
        by_hash[(gone[path].hash, gone[path].kind)].append(gone[path])
    t = time.perf_counter()
    if plan.extraction is not None and existing:  # until it ends, its files are under no key
        nowrite.check("read every file again")
        with db.write(engine, retry_seconds=settings.lock_retry_seconds) as conn:
            meta.remove(conn, meta.extracted(source.id))
            meta.remove(conn, meta.linked(source.id))
    # A load into a store without any file builds some indexes once, not per row (coldload.py).
    cold = bool(jobs) and not existing and (deferred or coldload.store_is_empty(engine))
    if deferred and not cold and (jobs or gone):
        coldload.finish(engine, settings.lock_retry_seconds)  # these batches need them back
        deferred = False
    pending: list[FileOp] = []

    def flush() -> None:
        nonlocal deferred, pending
        deferred = _write_batch(engine, settings, source, pending, report, cold) or deferred
        pending = []

    for done, prepared in enumerate(extraction.take(len(jobs)), 1):
        op = _classify(prepared, existing.get(prepared.path), by_hash, gone, source, report)
        if (count := len(prepared.concepts)) > (most := settings.max_concepts_per_file):
            why = f"{count} distinct concepts (over {most}): mentions kept, no pairs added"
            report.warnings.append(Problem(source.name, prepared.path, why))
        if op is not None:
            pending.append(op)
        if len(pending) >= settings.batch_files:
            flush()
        if progress is not None:
            progress(done, len(jobs))
    report.warnings += [Problem(source.name, ".", note) for note in extraction.notes]
    extraction.notes.clear()
    for path in sorted(gone):
        pending.append(Delete(path, gone[path]))
        if len(pending) >= settings.batch_files:
            flush()
    if pending:
        flush()
    if plan.extraction is not None or plan.linked is not None:
        nowrite.check("record how its files were read")
        with db.write(engine, retry_seconds=settings.lock_retry_seconds) as conn:
            if plan.extraction is not None:  # every file of the source is stored under it now
                meta.put(conn, meta.extracted(source.id), plan.extraction)
            if plan.linked is not None:
                meta.mark_linked(conn, source.id, plan.linked)
    report.phases["files"] = report.phases.get("files", 0.0) + time.perf_counter() - t
    return deferred


def _jobs(
    files: list[ScannedFile],
    existing: dict[str, Existing],
    settings: Settings,
    reread: bool,
    root: Path,
    again: bool = False,
) -> list[Job]:
    """The files to read: new ones, and stored ones whose size, mtime or kind changed (each
    read only where it still lies inside ``root``, the source folder); with ``reread`` every
    one, and with ``again`` every one extracted anew, the same hash or not (_marks)."""
    get = existing.get
    changed = [  # the mtime first: it is what differs when anything does
        (f, old)
        for f in files
        if (old := get(f.path)) is None
        or reread
        or again
        or old.mtime_ns != f.mtime_ns
        or old.size != f.size
        or old.kind != f.kind
    ]
    if not changed:
        return []
    from contextgraph.sync.ingest import read_job  # extraction: not loaded by a no-change sync

    real_root = os.path.realpath(root)
    return [
        read_job(
            f, old.hash if old and old.kind == f.kind and not again else None, settings, real_root
        )
        for f, old in changed
    ]


def _classify(
    prepared: Prepared,
    old: Existing | None,
    by_hash: dict[tuple[str, str], list[Existing]],
    gone: dict[str, Existing],
    source: SourceInfo,
    report: SyncReport,
) -> FileOp | None:
    for warning in prepared.warnings:
        report.warnings.append(Problem(source.name, prepared.path, warning))
    report.dropped_links += prepared.dropped
    if prepared.status == "failed":
        report.failed.append(Problem(source.name, prepared.path, prepared.reason or "failed"))
        if old is not None:
            gone[prepared.path] = old  # retracted like a deleted file: a fresh sync has no trace
        return None
    if prepared.status == "same":  # only a known file can hash the same, so ``old`` is set
        return None if old is None else Stat(prepared.path, old, prepared)
    if old is not None and old.kind == prepared.kind:
        report.updated += 1
        return Update(prepared.path, old, prepared)
    if old is not None:  # the same path changed kind (cannot happen with suffix-based kinds)
        gone[prepared.path] = old
    twins = by_hash.get((prepared.hash or "", prepared.kind))
    if twins:
        moved = twins.pop(0)
        for path, entry in list(gone.items()):
            if entry is moved:
                del gone[path]
        report.renamed += 1
        return Rename(prepared.path, moved, prepared)
    report.added += 1
    return Insert(prepared.path, prepared)


def _write_batch(
    engine: Engine,
    settings: Settings,
    source: SourceInfo,
    ops: list[FileOp],
    report: SyncReport,
    defer_index: bool = False,
) -> bool:
    """Apply one batch of file changes in one short write transaction.

    With ``defer_index`` (a batch of a cold load, SQLite) what :mod:`contextgraph.sync.coldload`
    builds once is dropped if it is still there, and the batch indexes its inserted rows'
    text itself; returns whether the load is deferred.
    """
    deferred = False

    def batch(conn: Connection) -> None:
        nonlocal deferred
        deferred = defer_index and (coldload.defer(conn) or coldload.is_deferred(conn))
        graph_changed, code_changed = apply_ops(
            conn, settings, source.id, ops, index_inserts=deferred
        )
        if graph_changed:
            meta.mark_stale(conn, meta.COMMUNITIES)
        if code_changed:
            meta.mark_stale(conn, meta.code_graph(source.id))

    # One transaction; PostgreSQL reruns it after a serialization failure or deadlock. A cold
    # load's batches insert rows that refer only to rows of the same batch, or to a source and
    # concepts no other writer may delete while this sync holds the sync lock: SQLite's
    # foreign-key checks (an index lookup per row and key) are off for them.
    db.run_write(
        engine, batch, retry_seconds=settings.lock_retry_seconds, foreign_keys=not defer_index
    )
    report.deleted += sum(1 for op in ops if isinstance(op, Delete))
    return deferred


def _is_stale(engine: Engine, name: str) -> bool:
    with db.read(engine) as conn:
        return meta.is_stale(conn, name)


def _count(engine: Engine, report: SyncReport) -> None:
    with db.read(engine) as conn:
        totals = counts(conn, files=False)  # a report has no file counts: skip their table scan
    report.concepts = totals["concepts"]
    report.relations = totals["relations"]
    report.entities = sum(totals["entities"].values())
    report.code_relations = sum(totals["codeRelations"].values())
    if report.communities is None:
        report.communities, report.modularity = totals["communities"], totals["modularity"]


__all__ = [
    "Problem",
    "ScannedFile",
    "SyncReport",
    "forget_source",
    "lock_database",
    "run_sync",
    "sync_lock",
    "sync_paths",
]
