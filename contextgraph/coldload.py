"""A cold load: a sync into a SQLite store without any file builds what it can once, not per row.

Two kinds of schema object cost a cold load more per row than built once: the full-text insert
trigger (FTS5 row by row costs about 1.5x one ``INSERT INTO files_fts … SELECT`` per batch) and
the secondary indexes of the two big link tables, which every co-occurrence upsert and mention
insert must also update. So the first batch of a cold load, in its own write transaction,
keeps their SQL in ``meta`` (:data:`DEFERRED_KEY`) and drops them; each batch then indexes its
new files' text itself, inside its transaction (:func:`contextgraph.fulltext.index_files`), so
the full-text index never lags the files; and one transaction at the end recreates the objects
exactly as they were (:func:`restore`). Without the indexes, queries give the same answers,
only slower, for the length of the load.

A sync killed in between leaves the key: every sync starts by calling :func:`restore` (under
the sync lock, before any of its batches), and every writer of ``files`` is a sync.

PostgreSQL computes its full-text vector per row in the row's own trigger and builds indexes in
parallel with the load; nothing is deferred there.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection

from contextgraph import meta
from contextgraph.dialect import is_postgresql
from contextgraph.errors import CorruptDatabase

DEFERRED_KEY = "sync:deferred_schema"  # meta: {name: SQL} of the objects a cold load dropped
# (type, name): what a cold load builds once. Dropped in this order, recreated in reverse.
DEFERRED = (
    ("trigger", "files_fts_insert"),
    ("index", "ix_concept_relations_b_id_a_id"),
    ("index", "ix_mentions_concept_id_file_id"),
)


def defer(conn: Connection) -> bool:
    """Drop the :data:`DEFERRED` objects, keeping their SQL; False if already deferred.

    Call inside the write transaction of a cold load's first batch (SQLite only). While this is
    in effect, whoever inserts files must index their text (the trigger is gone).
    """
    if is_deferred(conn):
        return False
    kept: dict[str, str] = {}
    for kind, name in DEFERRED:
        sql = _sql_of(conn, kind, name)
        if sql is not None:
            kept[name] = sql
    meta.put(conn, DEFERRED_KEY, json.dumps(kept))
    for kind, name in DEFERRED:
        if name in kept:
            conn.exec_driver_sql(f"DROP {kind.upper()} {name}")
    return True


def is_deferred(conn: Connection) -> bool:
    """True while a cold load has the :data:`DEFERRED` objects dropped (or was killed meanwhile)."""
    return not is_postgresql(conn) and meta.get(conn, DEFERRED_KEY) is not None


def restore(conn: Connection) -> None:
    """Recreate every object a cold load dropped, exactly as it was; call in a write transaction."""
    raw = meta.get(conn, DEFERRED_KEY)
    if raw is None:
        return
    try:
        kept = json.loads(raw)
    except ValueError as exc:
        raise CorruptDatabase(f"meta {DEFERRED_KEY!r} is not JSON") from exc
    for kind, name in reversed(DEFERRED):
        if name in kept and _sql_of(conn, kind, name) is None:
            conn.exec_driver_sql(kept[name])
    conn.execute(meta.T_META.delete().where(meta.T_META.c.key == DEFERRED_KEY))


def _sql_of(conn: Connection, kind: str, name: str) -> str | None:
    sql = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).scalar()
    return None if sql is None else str(sql)


__all__ = ["DEFERRED", "DEFERRED_KEY", "defer", "is_deferred", "restore"]
