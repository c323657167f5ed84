"""Sync (SPEC §3): bring the store exactly to what a from-scratch sync of the files would give.

Per source: scan, compare size and mtime_ns with the store, read and hash what changed, extract
(in a process pool when there is much to do), then write in short ``BEGIN IMMEDIATE`` batches.
Each batch moves a set of files wholly from their old state to their new one, so a sync killed at
any instant leaves a consistent store, and the files it did not reach still look changed to the
next sync. Derived state that spans files (the code graph of a source, the communities) is marked
stale inside the batch that changes its inputs and recomputed at the end, so it converges too.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import combinations
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    delete,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from contextgraph import db
from contextgraph.errors import SyncInProgress
from contextgraph.ingest import Job, Prepared, prepare
from contextgraph.models import ConceptRelation, Entity, File, Mention, Meta, table_of
from contextgraph.neighbourhood import bump_version
from contextgraph.scan import ScannedFile, scan
from contextgraph.settings import Settings
from contextgraph.sources import SourceInfo, list_sources
from contextgraph.stats import counts

T_FILES = table_of(File)
T_ENTITIES = table_of(Entity)
T_MENTIONS = table_of(Mention)
T_CREL = table_of(ConceptRelation)
T_META = table_of(Meta)

CHUNK = 500  # ids per IN (...) list; far below SQLite's bound-parameter limit
POOL_THRESHOLD = 400  # files to extract before a process pool pays for its start-up

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Problem:
    """A file the sync could not take (``failed``) or took with a caveat (``warning``)."""

    source: str
    path: str
    reason: str


@dataclass
class SyncReport:
    """What a sync did; ``as_dict`` gives the JSON shape the CLI prints."""

    sources: list[str] = field(default_factory=list)
    scanned: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    renamed: int = 0
    failed: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    dropped_links: int = 0
    concepts: int = 0
    relations: int = 0
    entities: int = 0
    code_relations: int = 0
    communities: int | None = None
    modularity: float | None = None
    graph_changed: bool = False
    phases: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "files": {
                "scanned": self.scanned,
                "added": self.added,
                "updated": self.updated,
                "unchanged": self.unchanged,
                "deleted": self.deleted,
                "renamed": self.renamed,
                "failed": len(self.failed),
            },
            "failed": [p.__dict__ for p in self.failed],
            "warnings": [p.__dict__ for p in self.warnings],
            "droppedLinks": self.dropped_links,
            "concepts": self.concepts,
            "relations": self.relations,
            "entities": self.entities,
            "codeRelations": self.code_relations,
            "communities": self.communities,
            "modularity": self.modularity,
            "seconds": {k: round(v, 4) for k, v in self.phases.items()},
        }


@dataclass(frozen=True)
class _Existing:
    id: int
    kind: str
    size: int
    mtime_ns: int
    hash: str


@dataclass
class _Op:
    action: str  # insert | update | stat | rename | delete
    path: str
    prepared: Prepared | None = None
    old: _Existing | None = None

    @property
    def new(self) -> Prepared:
        assert self.prepared is not None, self.action
        return self.prepared

    @property
    def old_id(self) -> int:
        assert self.old is not None, self.action
        return self.old.id


_thread_lock = threading.Lock()


@contextmanager
def sync_lock(db_path: Path | None, *, wait: bool = True) -> Iterator[None]:
    """Hold the one-sync-per-database lock (an advisory file lock the OS frees on any exit)."""
    if db_path is None:
        acquired = _thread_lock.acquire(blocking=wait)
        if not acquired:
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
            raise SyncInProgress("a sync is already running on this database") from exc
        yield
    finally:
        os.close(fd)  # closing releases the lock


def run_sync(
    engine: Engine,
    settings: Settings,
    *,
    sources: Sequence[str] | None = None,
    wait: bool = True,
    progress: Progress | None = None,
) -> SyncReport:
    """Sync the named sources (all registered ones by default) and recompute what went stale."""
    report = SyncReport()
    db_path = db.database_path(engine)
    started = time.perf_counter()
    with sync_lock(db_path, wait=wait):
        report.phases["lock"] = time.perf_counter() - started
        with db.read(engine) as conn:
            registered = list_sources(conn)
        chosen = [s for s in registered if sources is None or s.name in sources]
        exclude = _database_files(db_path)
        for source in chosen:
            report.sources.append(source.name)
            _sync_source(engine, settings, source, exclude, report, progress)
        t = time.perf_counter()
        for source in registered:
            if _is_stale(engine, f"codegraph:{source.id}"):
                from contextgraph.codesync import rebuild_code_graph

                rebuild_code_graph(engine, source.id)
        report.phases["codegraph"] = time.perf_counter() - t
        t = time.perf_counter()
        if _is_stale(engine, "communities"):
            report.graph_changed = True
            _recompute_communities(engine, settings, report)
        report.phases["communities"] = time.perf_counter() - t
        t = time.perf_counter()
        _refresh_weights(engine, settings)
        report.phases["weights"] = time.perf_counter() - t
        _count(engine, report)
    report.phases["total"] = time.perf_counter() - started
    return report


def _recompute_communities(engine: Engine, settings: Settings, report: SyncReport) -> None:
    from contextgraph import communities  # imports igraph: only when there is work for it

    run = communities.recompute(engine, settings)
    report.communities = run.community_count
    report.modularity = run.modularity


def _refresh_weights(engine: Engine, settings: Settings) -> None:
    """Precompute BuildContext's weight sums when the graph (or a decay setting) changed."""
    if settings.weights_min_notes <= 0:
        return  # off: lists left from before stay exact (they carry their graph version)
    from contextgraph import weights

    if not weights.is_current(engine, settings):
        weights.refresh(engine, settings)


def _database_files(db_path: Path | None) -> list[Path]:
    if db_path is None:
        return []
    suffixes = ("", "-wal", "-shm", "-journal", ".sync.lock")
    return [db_path.with_name(db_path.name + s) for s in suffixes]


def _sync_source(
    engine: Engine,
    settings: Settings,
    source: SourceInfo,
    exclude: list[Path],
    report: SyncReport,
    progress: Progress | None,
) -> None:
    t = time.perf_counter()
    if not source.root.is_dir():
        report.failed.append(Problem(source.name, ".", "source folder is missing"))
        return
    scanned = scan(source.root, exclude=exclude)
    for path, reason in scanned.problems:
        report.failed.append(Problem(source.name, path, reason))
    report.scanned += len(scanned.files)
    with db.read(engine) as conn:
        existing = {
            r.path: _Existing(r.id, r.kind, r.size, r.mtime_ns, r.hash)
            for r in conn.execute(
                select(
                    T_FILES.c.id,
                    T_FILES.c.path,
                    T_FILES.c.kind,
                    T_FILES.c.size,
                    T_FILES.c.mtime_ns,
                    T_FILES.c.hash,
                ).where(T_FILES.c.source_id == source.id)
            )
        }
    report.phases["scan"] = report.phases.get("scan", 0.0) + time.perf_counter() - t

    jobs: list[Job] = []
    present: set[str] = set()
    for f in scanned.files:
        present.add(f.path)
        old = existing.get(f.path)
        if old and old.size == f.size and old.mtime_ns == f.mtime_ns and old.kind == f.kind:
            report.unchanged += 1
            continue
        known = old.hash if old and old.kind == f.kind else None
        jobs.append(Job(f.path, f.abspath, f.kind, known, settings.max_file_bytes))
    gone = {p: e for p, e in existing.items() if p not in present}
    by_hash: dict[tuple[str, str], list[_Existing]] = defaultdict(list)
    for path in sorted(gone):
        by_hash[(gone[path].hash, gone[path].kind)].append(gone[path])

    t = time.perf_counter()
    pending: list[_Op] = []
    for done, prepared in enumerate(_prepare_all(jobs, settings), start=1):
        op = _classify(prepared, existing.get(prepared.path), by_hash, gone, source, report)
        if len(prepared.concepts) > settings.max_concepts_per_file:
            report.warnings.append(
                Problem(
                    source.name,
                    prepared.path,
                    f"{len(prepared.concepts)} distinct concepts (over "
                    f"{settings.max_concepts_per_file}): mentions kept, no pairs added",
                )
            )
        if op is not None:
            pending.append(op)
        if len(pending) >= settings.batch_files:
            _write_batch(engine, settings, source, pending, report)
            pending = []
        if progress is not None:
            progress(done, len(jobs))
    for path in sorted(gone):
        pending.append(_Op("delete", path, old=gone[path]))
        if len(pending) >= settings.batch_files:
            _write_batch(engine, settings, source, pending, report)
            pending = []
    if pending:
        _write_batch(engine, settings, source, pending, report)
    report.phases["files"] = report.phases.get("files", 0.0) + time.perf_counter() - t


def _classify(
    prepared: Prepared,
    old: _Existing | None,
    by_hash: dict[tuple[str, str], list[_Existing]],
    gone: dict[str, _Existing],
    source: SourceInfo,
    report: SyncReport,
) -> _Op | None:
    for warning in prepared.warnings:
        report.warnings.append(Problem(source.name, prepared.path, warning))
    report.dropped_links += prepared.dropped
    if prepared.status == "failed":
        report.failed.append(Problem(source.name, prepared.path, prepared.reason or "failed"))
        if old is not None:
            gone[prepared.path] = old  # retracted like a deleted file: a fresh sync has no trace
        return None
    if prepared.status == "same":
        return _Op("stat", prepared.path, prepared, old)
    if old is not None and old.kind == prepared.kind:
        report.updated += 1
        return _Op("update", prepared.path, prepared, old)
    if old is not None:  # the same path changed kind (cannot happen with suffix-based kinds)
        gone[prepared.path] = old
    twins = by_hash.get((prepared.hash or "", prepared.kind))
    if twins:
        moved = twins.pop(0)
        for path, entry in list(gone.items()):
            if entry is moved:
                del gone[path]
        report.renamed += 1
        return _Op("rename", prepared.path, prepared, moved)
    report.added += 1
    return _Op("insert", prepared.path, prepared)


def _prepare_all(jobs: list[Job], settings: Settings) -> Iterable[Prepared]:
    workers = settings.workers or min(4, os.cpu_count() or 1)
    if workers <= 1 or len(jobs) < POOL_THRESHOLD:
        for job in jobs:
            yield prepare(job)
        return
    # spawn, not fork: no database connection (or lock) may cross into a child process.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        yield from pool.map(prepare, jobs, chunksize=32)


def _write_batch(
    engine: Engine, settings: Settings, source: SourceInfo, ops: list[_Op], report: SyncReport
) -> None:
    """Apply one batch of file changes in one short write transaction."""
    with db.write(engine, retry_seconds=settings.lock_retry_seconds) as conn:
        graph_changed, code_changed = _apply(conn, settings, source, ops)
        if graph_changed:
            _mark_stale(conn, "communities")
        if code_changed:
            _mark_stale(conn, f"codegraph:{source.id}")
    report.deleted += sum(1 for op in ops if op.action == "delete")


# Bulk writes run at the driver level: each statement below is built with SQLAlchemy Core and
# compiled once, then executed with plain tuples or dicts. Going through Core's per-row parameter
# processing cost more than SQLite itself (about 9 s of a 10,000-note cold sync).
_DIALECT = sqlite_dialect(paramstyle="named")


def _sql(stmt: Any) -> str:
    return str(stmt.compile(dialect=_DIALECT))


_FILE_COLUMNS = (
    "size",
    "mtime_ns",
    "hash",
    "title",
    "created",
    "modified",
    "text",
    "facts",
    "search_meta",
    "search_parts",
    "concept_count",
    "pairs",
    "warning",
)
SQL_STAT = _sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values(size=bindparam("size"), mtime_ns=bindparam("mtime_ns"), modified=bindparam("modified"))
)
SQL_RENAME = _sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values(
        path=bindparam("path"),
        size=bindparam("size"),
        mtime_ns=bindparam("mtime_ns"),
        modified=bindparam("modified"),
    )
)
SQL_UPDATE_FILE = _sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values({c: bindparam(c) for c in _FILE_COLUMNS})
)
SQL_INSERT_FILE = _sql(
    insert(T_FILES).values(
        {c: bindparam(c) for c in ("source_id", "path", "kind", "last_accessed", *_FILE_COLUMNS)}
    )
)
SQL_INSERT_CONCEPT = _sql(
    sqlite_insert(T_ENTITIES)
    .values(
        kind=bindparam("kind"), key=bindparam("k"), name=bindparam("k"), name_lower=bindparam("k")
    )
    .on_conflict_do_nothing(index_elements=["kind", "key"])
)
SQL_INSERT_MENTION = _sql(
    insert(T_MENTIONS).values(
        file_id=bindparam("f"), concept_id=bindparam("c"), count=bindparam("n")
    )
)
_upsert = sqlite_insert(T_CREL).values(
    a_id=bindparam("a"), b_id=bindparam("b"), count=bindparam("n")
)
SQL_ADD_PAIR = _sql(
    _upsert.on_conflict_do_update(
        index_elements=["a_id", "b_id"], set_={"count": T_CREL.c.count + _upsert.excluded.count}
    )
)
SQL_SUB_PAIR = _sql(
    update(T_CREL)
    .where(T_CREL.c.a_id == bindparam("a"), T_CREL.c.b_id == bindparam("b"))
    .values(count=T_CREL.c.count - bindparam("n"))
)
SQL_DROP_PAIR = _sql(
    delete(T_CREL).where(
        T_CREL.c.a_id == bindparam("a"),
        T_CREL.c.b_id == bindparam("b"),
        T_CREL.c.count <= literal_column("0"),
    )
)


def _apply(
    conn: Connection, settings: Settings, source: SourceInfo, ops: list[_Op]
) -> tuple[bool, bool]:
    """Move every file of ``ops`` to its new state; return (concept graph changed, code changed)."""
    code_changed = any(
        op.action != "stat"
        and (
            (op.prepared is not None and op.prepared.kind != "note")
            or (op.old is not None and op.old.kind != "note")
        )
        for op in ops
    )
    by_action: dict[str, list[_Op]] = defaultdict(list)
    for op in ops:
        by_action[op.action].append(op)
    if by_action["stat"]:
        conn.exec_driver_sql(
            SQL_STAT,
            [
                {
                    "id_": op.old.id,
                    "size": op.prepared.size,
                    "mtime_ns": op.prepared.mtime_ns,
                    "modified": op.prepared.mtime_ns / 1e9,
                }
                for op in by_action["stat"]
                if op.old is not None and op.prepared is not None
            ],
        )
    if by_action["rename"]:
        conn.exec_driver_sql(
            SQL_RENAME,
            [
                {
                    "id_": op.old.id,
                    "path": op.path,
                    "size": op.prepared.size,
                    "mtime_ns": op.prepared.mtime_ns,
                    "modified": op.prepared.mtime_ns / 1e9,
                }
                for op in by_action["rename"]
                if op.old is not None and op.prepared is not None
            ],
        )
    updates, deletes, inserts = by_action["update"], by_action["delete"], by_action["insert"]

    # An edit that leaves the concept counts alone leaves the graph alone (the common case).
    old_concepts = _concepts_of(conn, [op.old.id for op in updates if op.old is not None])
    graph_updates: list[_Op] = []
    for op in updates:
        assert op.old is not None and op.prepared is not None
        new = dict(op.prepared.concepts)
        pairs = 1 if len(new) <= settings.max_concepts_per_file else 0
        old_map, old_pairs = old_concepts.get(op.old.id, ({}, 1))
        if new != old_map or (new and pairs != old_pairs):
            graph_updates.append(op)
    retract_ids = [op.old.id for op in graph_updates + deletes if op.old is not None]
    touched = _retract(conn, retract_ids)
    graph_changed = bool(touched)

    for chunk in _chunks([op.old.id for op in deletes if op.old is not None]):
        conn.execute(delete(T_FILES).where(T_FILES.c.id.in_(chunk)))
    if updates:
        conn.exec_driver_sql(
            SQL_UPDATE_FILE,
            [{"id_": op.old_id, **_file_values(op.new, settings)} for op in updates],
        )
    new_ids: dict[str, int] = {}
    if inserts:
        conn.exec_driver_sql(
            SQL_INSERT_FILE,
            [
                {
                    "source_id": source.id,
                    "path": op.path,
                    "kind": op.new.kind,
                    "last_accessed": None,
                    **_file_values(op.new, settings),
                }
                for op in inserts
            ],
        )
        for chunk in _chunks([op.path for op in inserts]):
            new_ids.update(
                conn.execute(
                    select(T_FILES.c.path, T_FILES.c.id).where(
                        T_FILES.c.source_id == source.id, T_FILES.c.path.in_(chunk)
                    )
                ).all()
            )

    applied: list[tuple[int, Prepared]] = []
    for op in graph_updates:
        assert op.old is not None and op.prepared is not None
        applied.append((op.old.id, op.prepared))
    for op in inserts:
        assert op.prepared is not None
        applied.append((new_ids[op.path], op.prepared))
    applied = [(fid, p) for fid, p in applied if p.kind == "note" and p.concepts]
    if applied:
        graph_changed = True
        _apply_concepts(conn, settings, applied)
    if touched:
        _delete_orphan_concepts(conn, touched)
    if ops:
        bump_version(conn)  # reference times, mentions or counts may have changed
    return graph_changed, code_changed


def _file_values(p: Prepared, settings: Settings) -> dict[str, Any]:
    count = len(p.concepts)
    return {
        "size": p.size,
        "mtime_ns": p.mtime_ns,
        "hash": p.hash,
        "title": p.title,
        "created": p.created,
        "modified": p.mtime_ns / 1e9,
        "text": p.text,
        "facts": p.facts,
        "search_meta": p.search_meta,
        "search_parts": p.search_parts,
        "concept_count": count,
        "pairs": 1 if count <= settings.max_concepts_per_file else 0,
        "warning": "; ".join(p.warnings) or None,
    }


def _concepts_of(conn: Connection, file_ids: list[int]) -> dict[int, tuple[dict[str, int], int]]:
    """The stored concept counts and pairs flag of each file."""
    out: dict[int, tuple[dict[str, int], int]] = {}
    for chunk in _chunks(file_ids):
        flags = conn.execute(select(T_FILES.c.id, T_FILES.c.pairs).where(T_FILES.c.id.in_(chunk)))
        for fid, pairs in flags:
            out[fid] = ({}, int(pairs))
        rows = conn.execute(
            select(T_MENTIONS.c.file_id, T_ENTITIES.c.key, T_MENTIONS.c.count)
            .join(T_ENTITIES, T_ENTITIES.c.id == T_MENTIONS.c.concept_id)
            .where(T_MENTIONS.c.file_id.in_(chunk))
        )
        for fid, key, count in rows:
            out[fid][0][key] = count
    return out


def _retract(conn: Connection, file_ids: list[int]) -> set[int]:
    """Remove the mentions and co-occurrences the given files contributed; return their concepts."""
    touched: set[int] = set()
    if not file_ids:
        return touched
    decrements: Counter[tuple[int, int]] = Counter()
    for chunk in _chunks(file_ids):
        with_pairs = {
            r[0]
            for r in conn.execute(
                select(T_FILES.c.id).where(T_FILES.c.id.in_(chunk), T_FILES.c.pairs == 1)
            )
        }
        per_file: dict[int, list[int]] = defaultdict(list)
        for fid, cid in conn.execute(
            select(T_MENTIONS.c.file_id, T_MENTIONS.c.concept_id).where(
                T_MENTIONS.c.file_id.in_(chunk)
            )
        ):
            per_file[fid].append(cid)
            touched.add(cid)
        for fid, cids in per_file.items():
            if fid in with_pairs:
                decrements.update(combinations(sorted(cids), 2))
        conn.execute(delete(T_MENTIONS).where(T_MENTIONS.c.file_id.in_(chunk)))
    if decrements:
        rows = [{"a": a, "b": b, "n": n} for (a, b), n in sorted(decrements.items())]
        conn.exec_driver_sql(SQL_SUB_PAIR, rows)
        conn.exec_driver_sql(SQL_DROP_PAIR, [{"a": r["a"], "b": r["b"]} for r in rows])
    return touched


def _apply_concepts(
    conn: Connection, settings: Settings, applied: list[tuple[int, Prepared]]
) -> None:
    """Insert the mentions of freshly read notes and add their co-occurrence pairs."""
    names = sorted({name for _, p in applied for name, _ in p.concepts})
    conn.exec_driver_sql(SQL_INSERT_CONCEPT, [{"kind": "concept", "k": n} for n in names])
    ids: dict[str, int] = {}
    for chunk in _chunks(names):
        ids.update(
            conn.execute(
                select(T_ENTITIES.c.key, T_ENTITIES.c.id).where(
                    T_ENTITIES.c.kind == "concept", T_ENTITIES.c.key.in_(chunk)
                )
            ).all()
        )
    mention_rows = []
    increments: Counter[tuple[int, int]] = Counter()
    for fid, p in applied:
        cids = []
        for name, count in p.concepts:
            cid = ids[name]
            cids.append(cid)
            mention_rows.append({"f": fid, "c": cid, "n": count})
        if len(cids) <= settings.max_concepts_per_file:
            increments.update(combinations(sorted(cids), 2))
    conn.exec_driver_sql(SQL_INSERT_MENTION, mention_rows)
    if increments:
        conn.exec_driver_sql(
            SQL_ADD_PAIR, [{"a": a, "b": b, "n": n} for (a, b), n in sorted(increments.items())]
        )


def _delete_orphan_concepts(conn: Connection, concept_ids: set[int]) -> None:
    has_mention = (
        select(T_MENTIONS.c.concept_id).where(T_MENTIONS.c.concept_id == T_ENTITIES.c.id).exists()
    )
    for chunk in _chunks(sorted(concept_ids)):
        conn.execute(
            delete(T_ENTITIES).where(
                T_ENTITIES.c.id.in_(chunk), T_ENTITIES.c.kind == "concept", ~has_mention
            )
        )


def _mark_stale(conn: Connection, key: str) -> None:
    stmt = sqlite_insert(T_META).values(key=f"stale:{key}", value="1")
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": "1"}))


def clear_stale(conn: Connection, key: str) -> None:
    """Mark derived state ``key`` as recomputed (called inside the recomputing transaction)."""
    conn.execute(delete(T_META).where(T_META.c.key == f"stale:{key}"))


def _is_stale(engine: Engine, key: str) -> bool:
    with db.read(engine) as conn:
        return (
            conn.execute(select(T_META.c.value).where(T_META.c.key == f"stale:{key}")).first()
            is not None
        )


def _count(engine: Engine, report: SyncReport) -> None:
    with db.read(engine) as conn:
        totals = counts(conn)
    report.concepts = totals["concepts"]
    report.relations = totals["relations"]
    report.entities = sum(totals["entities"].values())
    report.code_relations = sum(totals["codeRelations"].values())
    if report.communities is None:
        report.communities, report.modularity = totals["communities"], totals["modularity"]


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["Problem", "ScannedFile", "SyncReport", "clear_stale", "run_sync", "sync_lock"]
