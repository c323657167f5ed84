"""Whether an SQLite file is contextgraph's to touch.

Every command migrates the database it opens, and the first connection switches a file to WAL.
Pointed by mistake at another program's database (a browser's ``places.sqlite``, an app's
cache), that would install contextgraph's schema beside the other program's tables and change
the file's journal mode. So a file that holds tables and no contextgraph schema, or an Alembic
revision contextgraph does not know, is refused before anything is written to it. An empty
SQLite file (no tables) is fine: it becomes a contextgraph database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, column, inspect, select, table

from contextgraph.errors import DatabaseError
from contextgraph.store.peek import read_only_uri

ALEMBIC_TABLE = "alembic_version"
# Tables every contextgraph schema has had since its first revision (0001_core).
_OURS = frozenset({"sources", "files", "entities", "mentions", "meta"})
_LISTED = 3


def known_revisions() -> frozenset[str]:
    """The revisions of the migration scripts shipped in this installation."""
    versions = Path(__file__).resolve().parent / "migrations" / "versions"
    return frozenset(p.stem for p in versions.glob("[0-9]*.py"))


def wal_wanted(cursor: Any) -> bool:
    """Whether a new connection (a DB-API cursor on it) should put the file in WAL mode.

    Not when it is in WAL mode already; else yes for an empty file and for one with
    contextgraph's tables, no for a file holding other tables (the refusal itself comes from
    :func:`refuse_foreign` when the schema is checked). Only PRAGMAs are run. An SQLite older
    than 3.37 knows no ``table_list`` and lists nothing: the switch happens, as it always did.
    """
    mode = cursor.execute("PRAGMA journal_mode").fetchone()
    if mode is not None and str(mode[0]).lower() == "wal":
        return False
    names = {
        str(row[1])
        for row in cursor.execute("PRAGMA table_list").fetchall()
        if row[0] == "main" and not str(row[1]).startswith("sqlite_")
    }
    names.discard(ALEMBIC_TABLE)
    return not names or names >= _OURS


def refuse_foreign(conn: Connection, where: str) -> None:
    """Raise :class:`DatabaseError` if the database behind ``conn`` is not contextgraph's: it
    holds tables but no ``alembic_version`` row, or a revision no script here knows. On
    PostgreSQL, the tables of the schema the connection uses (``public``)."""
    if conn.dialect.name == "sqlite":
        master = table("sqlite_master", column("type"), column("name"))
        names = sorted(
            str(row[0])
            for row in conn.execute(
                select(master.c.name).where(
                    master.c.type.in_(["table", "view"]), ~master.c.name.startswith("sqlite_")
                )
            )
        )
    else:
        found = inspect(conn)
        names = sorted({*found.get_table_names(), *found.get_view_names()})
    revision = None
    if ALEMBIC_TABLE in names:
        version = table(ALEMBIC_TABLE, column("version_num"))
        row = conn.execute(select(version.c.version_num)).first()
        revision = None if row is None else str(row[0])
    _judge(names, revision, where)


def refuse_foreign_file(path: Path, where: str, timeout_seconds: float) -> None:
    """:func:`refuse_foreign` for an existing SQLite file, made on a read-only connection of the
    standard library's driver before any read-write connection opens it.

    A read-write connection would change another program's file before the schema check
    could refuse it: SQLite recovers a ``-wal`` left by a crash and copies it into the file
    when its last connection closes, and the first connection switches a file that is not in
    WAL mode to it. A read-only one changes neither (:mod:`contextgraph.store.peek`). A file
    SQLite cannot read as a database (or cannot read now) passes: opening it reports what it
    is, as before.
    """
    try:
        if path.stat().st_size == 0:
            return
        conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=timeout_seconds)
    except (OSError, sqlite3.Error):
        return
    try:
        names = sorted(
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND substr(name, 1, 7) != 'sqlite_'"
            )
        )
        revision = None
        if ALEMBIC_TABLE in names:
            row = conn.execute(f"SELECT version_num FROM {ALEMBIC_TABLE}").fetchone()
            revision = None if row is None else str(row[0])
    except sqlite3.Error:
        return
    finally:
        conn.close()
    _judge(names, revision, where)


def _judge(names: list[str], revision: str | None, where: str) -> None:
    """Refuse a database holding ``names`` (tables and views, sorted) at ``revision``."""
    if not names:
        return
    if revision is not None:
        if revision not in known_revisions():
            raise DatabaseError(
                f"{where} has schema revision {revision[:64]!r}, which this contextgraph does "
                "not know (a newer contextgraph's database, or another application's): "
                "nothing was changed"
            )
        return
    others = [n for n in names if n != ALEMBIC_TABLE]
    if others:
        listed = ", ".join(repr(n)[1:-1] for n in others[:_LISTED])
        listed += ", …" if len(others) > _LISTED else ""
        raise DatabaseError(
            f"{where} belongs to another application (it holds tables contextgraph did not "
            f"make: {listed}): contextgraph leaves it untouched"
        )
