"""A cold load: a sync into a SQLite store without any file builds what it can once, not per row.

Two kinds of schema object cost a cold load more per row than built once: the full-text insert
trigger (FTS5 row by row costs about 1.5x one ``INSERT INTO files_fts … SELECT`` per batch) and
the secondary indexes of the two big link tables, which every co-occurrence upsert and mention
insert must also update. So the first batch of a cold load, in its own write transaction, keeps
their SQL in the stale mark :data:`COLD_LOAD` of ``meta`` and drops them; each batch then
indexes its new files' text itself, inside its transaction
(:func:`contextgraph.store.fulltext.index_files`), so the full-text index never lags the files;
and one transaction at the end recreates the objects exactly as they were (:func:`restore`).
Without the indexes, queries give the same answers, only slower, for the length of the load.

A sync killed in between leaves the mark: every sync starts by calling :func:`restore` (under
the sync lock, before any of its batches), and every writer of ``files`` is a sync.

PostgreSQL computes its full-text vector per row in the row's own trigger and builds indexes in
parallel with the load; nothing is deferred there.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, Index, column, select
from sqlalchemy import table as table_clause

from contextgraph.errors import CorruptDatabase
from contextgraph.store import meta
from contextgraph.store.dialect import is_postgresql
from contextgraph.store.models import T_CREL, T_MENTIONS

COLD_LOAD = "cold-load"  # the stale mark; its value: {name: SQL} of the objects dropped
_TRIGGER = "files_fts_insert"  # the full-text insert trigger (migration 0003)
# What a cold load builds once, besides the trigger: the link tables' secondary indexes.
_INDEXES = ("ix_concept_relations_b_id_a_id", "ix_mentions_concept_id_file_id")
DEFERRED = (_TRIGGER, *_INDEXES)
_MASTER = table_clause("sqlite_master", column("type"), column("name"), column("sql"))


def defer(conn: Connection) -> bool:
    """Drop the :data:`DEFERRED` objects, keeping their SQL; False if already deferred.

    Call inside the write transaction of a cold load's first batch (SQLite only). While this is
    in effect, whoever inserts files must index their text (the trigger is gone).
    """
    if is_deferred(conn):
        return False
    query = select(_MASTER.c.name, _MASTER.c.sql).where(_MASTER.c.name.in_(DEFERRED))
    kept = {str(name): str(sql) for name, sql in conn.execute(query)}
    meta.put(conn, meta.STALE_PREFIX + COLD_LOAD, json.dumps(kept, sort_keys=True))
    if _TRIGGER in kept:
        conn.exec_driver_sql("DROP TRIGGER files_fts_insert")
    for index in _model_indexes():
        if index.name in kept:
            index.drop(conn)
    return True


def is_deferred(conn: Connection) -> bool:
    """True while a cold load has the :data:`DEFERRED` objects dropped (or was killed meanwhile)."""
    return not is_postgresql(conn) and meta.is_stale(conn, COLD_LOAD)


def restore(conn: Connection) -> None:
    """Recreate every object a cold load dropped, exactly as it was; call in a write transaction."""
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
    meta.clear_stale(conn, COLD_LOAD)


def _model_indexes() -> list[Index]:
    tables = (T_CREL, T_MENTIONS)
    return [index for t in tables for index in t.indexes if index.name in _INDEXES]


__all__ = ["COLD_LOAD", "DEFERRED", "defer", "is_deferred", "restore"]
