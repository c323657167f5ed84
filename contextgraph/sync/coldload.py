"""A cold load: a sync into a SQLite store without any file builds what it can once, not per row.

Two kinds of schema object cost a cold load more per row than built once: the insert triggers of
``files`` (the full-text one: FTS5 row by row costs about 1.5x one ``INSERT INTO files_fts …
SELECT`` per batch; the one that copies a file's source and reference time into
``search_dates``, migration 0005) and the secondary indexes of the two big link tables, which
every co-occurrence upsert and mention insert must also update. So the first batch of a cold
load, in its own write transaction, keeps their SQL in the stale mark :data:`COLD_LOAD` of
``meta`` and drops them; each batch then does the triggers' work for its new files itself,
inside its transaction (:func:`contextgraph.store.fulltext.index_files` and
:func:`fill_search_dates`), so neither the full-text index nor ``search_dates`` ever lags the
files; and one transaction at the end recreates the objects exactly as they were
(:func:`restore`). The sync runs it in a thread while its communities read, partition and store
the graph (:func:`contextgraph.sync.run._finish`), or before anything else writes: a code graph's
rebuild, batches that update or delete files. The new folders a sync loads after the first
load into the same deferral, their batches indexing their own files as the first folder's do.
Without the indexes, queries give the same answers, only slower, for the length of the load.

FTS5 also writes its index in fewer, larger pieces for the length of the load, and does not
merge them. It keeps a transaction's new entries in memory and writes them out as a new segment
at the start of each statement that writes it (its savepoint) and whenever they pass its
``hashsize`` (1 MiB by default), then merges segments as they pile up, four of a level at a
time (``automerge``), reading and writing each again. 27 batches of 500 notes wrote 62 segments.
Each batch indexes its files in one statement (:func:`contextgraph.store.fulltext.index_files`),
and while the load is deferred ``hashsize`` is :data:`LOAD_HASH_BYTES`, a bound rather than an
allocation (a batch of 1,000 notes of the long vault of ``scripts/long_vault.py`` needs less),
so each batch writes one segment; and ``automerge`` is 0, so the load's segments stay as
written, but for FTS5's ``crisismerge``: 16 segments of a level are merged at once. A cold CLI
sync of that vault (14 batches, 14 segments) took 0.23 s less than with two segments a batch
merged four at a time (10 of 10 pairs); its searches of common words, 0.2 ms more (5 ms).
:func:`restore` sets both options back as they were: the writes after the load merge the
segments as FTS5 always does, a little per page written. The index holds the same entries
either way.

A sync killed in between leaves the mark: every sync starts by calling :func:`restore` (under
the sync lock, before any of its batches), and every writer of ``files`` is a sync.

PostgreSQL computes its full-text vector per row in the row's own trigger and builds indexes in
parallel with the load; nothing is deferred there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import DDL, Connection, Engine, Index, Insert, column, delete, insert, select
from sqlalchemy import table as table_clause

from contextgraph.errors import CorruptDatabase
from contextgraph.graph.decay import reference_sql
from contextgraph.store import db, meta
from contextgraph.store.dialect import is_postgresql
from contextgraph.store.models import T_CREL, T_FILES, T_MENTIONS, T_SEARCH_DATES, T_SOURCES
from contextgraph.store.sqlcore import ForIds, IdList

COLD_LOAD = "cold-load"  # the stale mark; its value: {name: SQL} of the objects dropped
_TRIGGER = "files_fts_insert"  # the full-text insert trigger (migration 0003)
_DATES_TRIGGER = "search_dates_insert"  # copies each new file's dates (migration 0005)
# What a cold load builds once, besides the triggers: the link tables' secondary indexes.
_INDEXES = ("ix_concept_relations_b_id_a_id_count", "ix_mentions_concept_id_file_id")
DEFERRED = (_TRIGGER, _DATES_TRIGGER, *_INDEXES)
# FTS5's in-memory limit during a load (see above).
LOAD_HASH_BYTES = 16 * 1024 * 1024
# The FTS5 options a load sets: name -> (its value during the load, FTS5's default). The stale
# mark keeps each one's value configured before the load under "files_fts <name>" (None:
# FTS5's default, no row in files_fts_config).
_LOAD_OPTIONS = {"hashsize": (LOAD_HASH_BYTES, 1024 * 1024), "automerge": (0, 4)}
_MASTER = table_clause("sqlite_master", column("type"), column("name"), column("sql"))
_FTS_CONFIG = table_clause("files_fts_config", column("k"), column("v"))


def defer(conn: Connection) -> bool:
    """Drop the :data:`DEFERRED` objects, keeping their SQL, and set FTS5's ``hashsize`` to
    :data:`LOAD_HASH_BYTES` and its ``automerge`` to 0, keeping their values; False if already
    deferred.

    Call inside the write transaction of a cold load's first batch (SQLite only). While this is
    in effect, whoever inserts files must index their text and write their ``search_dates`` rows
    (the insert triggers are gone).
    """
    if is_deferred(conn):
        return False
    query = select(_MASTER.c.name, _MASTER.c.sql).where(_MASTER.c.name.in_(DEFERRED))
    kept: dict[str, object] = {str(name): str(sql) for name, sql in conn.execute(query)}
    configured = {str(k): v for k, v in conn.execute(select(_FTS_CONFIG.c.k, _FTS_CONFIG.c.v))}
    for option in _LOAD_OPTIONS:
        kept[f"files_fts {option}"] = configured.get(option)
    meta.put(conn, meta.STALE_PREFIX + COLD_LOAD, json.dumps(kept, sort_keys=True))
    for option, (during, _) in _LOAD_OPTIONS.items():
        _configure(conn, option, during)
    if _TRIGGER in kept:
        conn.exec_driver_sql("DROP TRIGGER files_fts_insert")
    if _DATES_TRIGGER in kept:
        # Migration DDL that Core has no construct for; restore() runs the kept CREATE again.
        conn.execute(DDL("DROP TRIGGER search_dates_insert"))  # type: ignore[no-untyped-call]
    for index in _model_indexes():
        if index.name in kept:
            index.drop(conn)
    return True


def store_is_empty(engine: Engine) -> bool:
    """True on SQLite when no source has any file stored: a sync's load would be a cold one."""
    if is_postgresql(engine):
        return False  # its index is a column computed per row: nothing to defer
    with db.read(engine) as conn:
        return conn.execute(select(T_FILES.c.id).limit(1)).first() is None


def finish(engine: Engine, retry_seconds: float) -> None:
    """:func:`restore` in a write transaction of its own."""
    with db.write(engine, retry_seconds=retry_seconds) as conn:
        restore(conn)


def is_deferred(conn: Connection) -> bool:
    """True while a cold load has the :data:`DEFERRED` objects dropped (or was killed meanwhile)."""
    return not is_postgresql(conn) and meta.is_stale(conn, COLD_LOAD)


def restore(conn: Connection) -> None:
    """Recreate every object a cold load dropped, exactly as it was, and set FTS5's options
    back; call in a write transaction."""
    raw = meta.get(conn, meta.STALE_PREFIX + COLD_LOAD)
    if raw is None:
        return
    try:
        kept = dict(json.loads(raw))
    except (TypeError, ValueError) as exc:
        raise CorruptDatabase(
            f"the stale mark {COLD_LOAD!r} does not hold the dropped SQL"
        ) from exc
    present = set(
        conn.execute(select(_MASTER.c.name).where(_MASTER.c.name.in_(DEFERRED))).scalars()
    )
    for name in reversed(DEFERRED):
        if name in kept and name not in present:
            conn.exec_driver_sql(str(kept[name]))  # the SQL sqlite_master held: migrations' DDL
    for option, (_, default) in _LOAD_OPTIONS.items():
        key = f"files_fts {option}"
        if key not in kept:  # absent from the marks of versions that left the option alone
            continue
        before = kept[key]
        _configure(conn, option, default if before is None else int(before))
        if before is None:  # as it was: no row (FTS5 reads the default when its row is gone)
            conn.execute(delete(_FTS_CONFIG).where(_FTS_CONFIG.c.k == option))
    meta.clear_stale(conn, COLD_LOAD)


def _configure(conn: Connection, option: str, value: int) -> None:
    """Set the FTS5 ``option`` of ``files_fts``: through FTS5, so that every connection reads it
    again (a row written straight into ``files_fts_config`` would not be seen by a connection
    that has the old value)."""
    assert option in _LOAD_OPTIONS, option  # a name of ours, never input
    sql = f"INSERT INTO files_fts(files_fts, rank) VALUES ('{option}', ?)"  # FTS5's own command
    conn.exec_driver_sql(sql, (int(value),))


def fill_search_dates(conn: Connection, file_ids: Sequence[int]) -> None:
    """Copy the given files' source and reference time into ``search_dates``, as the deferred
    insert trigger would have (the same expression: :func:`contextgraph.graph.decay.reference_sql`;
    only files whose source exists get a row)."""
    _FILL_SEARCH_DATES.execute(conn, file_ids)


def _fill_search_dates(ids: IdList) -> Insert:
    files = T_FILES
    source_exists = select(T_SOURCES.c.id).where(T_SOURCES.c.id == files.c.source_id).exists()
    rows = select(files.c.id, files.c.source_id, reference_sql(files)).where(
        files.c.id.in_(ids), source_exists
    )
    return (
        insert(T_SEARCH_DATES)
        .prefix_with("OR REPLACE", dialect="sqlite")
        .from_select(["id", "source_id", "reference"], rows)
    )


_FILL_SEARCH_DATES = ForIds(_fill_search_dates)


def _model_indexes() -> list[Index]:
    tables = (T_CREL, T_MENTIONS)
    return [index for t in tables for index in t.indexes if index.name in _INDEXES]


__all__ = [
    "COLD_LOAD",
    "DEFERRED",
    "LOAD_HASH_BYTES",
    "defer",
    "fill_search_dates",
    "finish",
    "is_deferred",
    "restore",
    "store_is_empty",
]
