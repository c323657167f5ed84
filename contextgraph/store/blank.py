"""A blank SQLite file gets the head schema in one transaction, without Alembic.

The migrations stay the one definition of the schema. But replaying them on a new file costs a
process about 0.15 s: Alembic's import and its scripts, then one step after another. That is
most of the start-up of a first ``contextgraph sync``, and of every test that opens a new
database. So the catalogue the migrations leave is kept beside this module, in
``schema_sqlite.json``: the head revision, and the SQL of every schema object in the order
SQLite lists them (``sqlite_master`` by rowid). FTS5's shadow tables are left out: creating
the virtual table creates them. :func:`create` runs those statements in one write
transaction, then stamps the revision, as Alembic would.

Nothing else may change. tests/test_migrations.py checks that the file is exactly what the
migrations build on a blank file, and that a file made from it has the same catalogue. After
adding a migration, run ``python scripts/schema_snapshot.py``: it migrates a scratch file with
Alembic and writes the snapshot anew. A snapshot whose revision is not ``SCHEMA_HEAD`` is never
used, and a file that already holds anything is left to Alembic. PostgreSQL always migrates
through Alembic: its schema differs (a tsvector column, not FTS5), and a server database is
created once, not by every test and first run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, column, insert, literal_column, select, table

SNAPSHOT = Path(__file__).resolve().with_name("schema_sqlite.json")
_VERSION = table("alembic_version", column("version_num"))
_MASTER = table("sqlite_master", column("type"), column("name"), column("tbl_name"), column("sql"))
_ROWID: ColumnElement[int] = literal_column("rowid")


def dump(conn: Connection) -> dict[str, Any]:
    """The snapshot of the SQLite database behind ``conn``: its revision and its objects' SQL."""
    shadow = {
        str(row[1]) for row in conn.exec_driver_sql("PRAGMA table_list") if row[2] == "shadow"
    }
    rows = conn.execute(
        select(_MASTER.c.name, _MASTER.c.sql).where(_MASTER.c.sql.is_not(None)).order_by(_ROWID)
    )
    objects = [str(sql) for name, sql in rows if name not in shadow]
    revision = conn.execute(select(_VERSION.c.version_num)).scalar_one()
    return {"revision": str(revision), "objects": objects}


def catalogue(conn: Connection) -> list[tuple[str, str, str, str | None]]:
    """(type, name, table, SQL) of every object of the database behind ``conn``, in rowid
    order: what a database made from the snapshot shares with one the migrations made."""
    rows = conn.execute(select(_MASTER).order_by(_ROWID))
    return [
        (str(t), str(n), str(tbl), None if sql is None else str(sql)) for t, n, tbl, sql in rows
    ]


def snapshot() -> dict[str, Any]:
    """The snapshot shipped with the package."""
    with SNAPSHOT.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


def create(conn: Connection, head: str) -> bool:
    """Give the blank SQLite database of ``conn`` (in a write transaction) the schema at
    ``head``; False, with nothing written, when the shipped snapshot is of another revision or
    the database is not blank."""
    shipped = snapshot()
    if shipped["revision"] != head:
        return False
    if conn.execute(select(_MASTER.c.name).limit(1)).first() is not None:
        return False
    for sql in shipped["objects"]:
        conn.exec_driver_sql(sql)  # the migrations' DDL, as sqlite_master kept it
    conn.execute(insert(_VERSION).values(version_num=head))
    return True
