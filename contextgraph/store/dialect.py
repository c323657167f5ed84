"""The dialect seam: every statement that SQLite and PostgreSQL spell differently, in one place.

The store layer builds its SQL with SQLAlchemy Core; where the two engines disagree (upserts,
scalar ``max``/``min``, ``total()``, driver-level parameter styles, full-text search), it calls a
function here instead of testing the dialect itself. SQLite keeps exactly the statements it had
before PostgreSQL existed; PostgreSQL gets the equivalent spelling.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Float,
    Table,
    inspect,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.functions import FunctionElement

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


def name_of(bind: Connection | Engine | Dialect) -> str:
    """``sqlite`` or ``postgresql``: the engine behind ``bind``."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return str(dialect.name)


def is_postgresql(bind: Connection | Engine | Dialect) -> bool:
    return name_of(bind) == POSTGRESQL


def engine_key(engine: Engine) -> str:
    """A key naming ``engine``'s database, for caches shared by its engines. Not ``str(url)``:
    that percent-quotes the path as UTF-8, which a path that is not UTF-8 cannot be."""
    url = engine.url
    query = sorted((k, str(v)) for k, v in url.query.items())
    return repr((url.drivername, url.username, url.host, url.port, url.database, query))


# PostgreSQL's B-tree refuses an entry over 2,704 bytes (a third of its 8 kB page, checked after
# compression), failing the whole transaction: a sync's batch, a code graph's rebuild. A path or
# code key of at most this many UTF-8 bytes fits any of its indexes with the entry's other
# columns (source id, kind, sizes, hash: under 100 bytes). SQLite has no such limit.
INDEXED_TEXT_MAX_BYTES = 2400


def fits_index(bind: Connection | Engine | Dialect, value: str) -> bool:
    """Whether ``value`` may be stored in an indexed column of ``bind``'s engine."""
    if not is_postgresql(bind):
        return True
    return len(value.encode("utf-8", "surrogatepass")) <= INDEXED_TEXT_MAX_BYTES


# -- inserts --------------------------------------------------------------------------------


def _insert(table: Table, dialect: str, values: Mapping[str, Any] | None) -> Any:
    """``INSERT INTO table`` (with ``values``, if given) in ``dialect``'s own ``Insert``."""
    if dialect == POSTGRESQL:
        from sqlalchemy.dialects import postgresql as engine
    else:
        from sqlalchemy.dialects import sqlite as engine  # type: ignore[no-redef]
    stmt = engine.insert(table)
    return stmt if values is None else stmt.values(dict(values))


def insert_ignore(
    table: Table,
    index_elements: Iterable[str],
    *,
    dialect: str,
    values: Mapping[str, Any] | None = None,
) -> Insert:
    """``INSERT … ON CONFLICT (index_elements) DO NOTHING`` for ``dialect``."""
    stmt = _insert(table, dialect, values)
    result: Insert = stmt.on_conflict_do_nothing(index_elements=list(index_elements))
    return result


def upsert(
    table: Table,
    index_elements: Iterable[str],
    set_: Callable[[Any], Mapping[str, Any]],
    *,
    dialect: str,
    values: Mapping[str, Any] | None = None,
) -> Insert:
    """``INSERT … ON CONFLICT (index_elements) DO UPDATE SET set_(excluded)`` for ``dialect``."""
    stmt = _insert(table, dialect, values)
    result: Insert = stmt.on_conflict_do_update(
        index_elements=list(index_elements), set_=dict(set_(stmt.excluded))
    )
    return result


# -- functions ------------------------------------------------------------------------------
# Each is a SQL construct that compiles to the engine's own spelling, so an expression built once
# (decay weights, reference times) runs on either engine and SQLite's SQL stays what it was.


class _Greatest(FunctionElement[Any]):
    inherit_cache = True
    name = "greatest"
    sqlite_name = "max"


class _Least(FunctionElement[Any]):
    inherit_cache = True
    name = "least"
    sqlite_name = "min"


class _Total(FunctionElement[float]):
    inherit_cache = True
    name = "total"
    type = Float()


@compiles(_Greatest)
@compiles(_Least)
def _pairwise_sqlite(element: _Greatest | _Least, compiler: Any, **kw: Any) -> str:
    return f"{element.sqlite_name}({compiler.process(element.clauses, **kw)})"


@compiles(_Greatest, POSTGRESQL)
@compiles(_Least, POSTGRESQL)
def _pairwise_pg(element: _Greatest | _Least, compiler: Any, **kw: Any) -> str:
    return f"{element.name}({compiler.process(element.clauses, **kw)})"


@compiles(_Total)
def _total_sqlite(element: _Total, compiler: Any, **kw: Any) -> str:
    value = next(iter(element.clauses))
    return f"total({compiler.process(value, **kw)})"


@compiles(_Total, POSTGRESQL)
def _total_pg(element: _Total, compiler: Any, **kw: Any) -> str:
    clauses = list(element.clauses)
    inner = compiler.process(clauses[0], **kw)
    if len(clauses) > 1:
        inner += " ORDER BY " + compiler.process(clauses[1], **kw)
    return f"coalesce(sum({inner}), 0.0)"


def greatest(a: Any, b: Any) -> ColumnElement[Any]:
    """The larger of two values (SQLite's two-argument ``max``; PostgreSQL's ``greatest``)."""
    return _Greatest(a, b)


def least(a: Any, b: Any) -> ColumnElement[Any]:
    """The smaller of two values (SQLite's two-argument ``min``; PostgreSQL's ``least``)."""
    return _Least(a, b)


def total(value: Any, *, order_by: Any = None) -> ColumnElement[float]:
    """A float sum that is 0.0 over no rows (SQLite's ``total``).

    On PostgreSQL the addends are summed in ``order_by`` order -- the order SQLite's index
    walk visits them in -- so both engines round the same float sum the same way.
    """
    return _Total(value) if order_by is None else _Total(value, order_by)


# -- driver-level statements ----------------------------------------------------------------


# SQL text compiled for SQLite by contextgraph.store.sqlcore.driver_sql, with how to build it for
# another engine: a PostgreSQL engine swaps the text for its own compilation just before it
# reaches the cursor (db.py), so call sites keep running plain prepared strings.
_DRIVER_SQL: dict[str, tuple[Callable[[str], Any], bool]] = {}
_TRANSLATED: dict[tuple[str, str], str] = {}
_registry_lock = threading.Lock()


def compile_for(build: Callable[[str], Any], dialect: str, *, literal_binds: bool = False) -> str:
    """Compile ``build(dialect)`` to the driver-level text of ``dialect`` (named parameters)."""
    kwargs = {"literal_binds": True} if literal_binds else {}
    return str(build(dialect).compile(dialect=named_dialect(dialect), compile_kwargs=kwargs))


def remember(sqlite_text: str, build: Callable[[str], Any], literal_binds: bool) -> None:
    """Record how to build the statement behind ``sqlite_text`` for another engine."""
    with _registry_lock:
        _DRIVER_SQL.setdefault(sqlite_text, (build, literal_binds))


def translate(statement: str, dialect: str) -> str:
    """The ``dialect`` text of a statement remembered under its SQLite text (else unchanged)."""
    cached = _TRANSLATED.get((statement, dialect))
    if cached is not None:
        return cached
    entry = _DRIVER_SQL.get(statement)
    if entry is None:
        return statement
    build, literal_binds = entry
    text = compile_for(build, dialect, literal_binds=literal_binds)
    with _registry_lock:
        _TRANSLATED[(statement, dialect)] = text
    return text


def named_dialect(name: str) -> Dialect:
    """A dialect of ``name`` compiling to named parameters (the driver-level texts' style)."""
    if name == POSTGRESQL:
        from sqlalchemy.dialects.postgresql import psycopg

        pg: Dialect = psycopg.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]
        return pg
    from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect

    lite: Dialect = sqlite_dialect(paramstyle="named")
    return lite


def qmark(bind: Connection | Engine, sql: str) -> str:
    """Driver-level SQL written with ``?`` placeholders, in the driver's own style.

    psycopg takes ``%s``; the statements given here hold no ``%`` and no ``?`` in literals.
    """
    if is_postgresql(bind):
        return sql.replace("?", "%s")
    return sql


# -- schema ---------------------------------------------------------------------------------


def has_table(conn: Connection, table: str) -> bool:
    """True when ``table`` exists (SQLite reads ``sqlite_master`` directly: no reflection)."""
    if name_of(conn) == SQLITE:
        from sqlalchemy import column, literal, select
        from sqlalchemy import table as table_clause

        master = table_clause("sqlite_master", column("type"), column("name"))
        row = conn.execute(
            select(literal(1)).where(master.c.type == "table", master.c.name == table)
        ).first()
        return row is not None
    return bool(inspect(conn).has_table(table))


def ensure_math_functions(dbapi_connection: sqlite3.Connection) -> None:
    """Register pow() and floor() where SQLite was built without its math functions."""
    try:
        dbapi_connection.execute("SELECT pow(2, 2), floor(1.5)").fetchone()
    except sqlite3.OperationalError:
        dbapi_connection.create_function("pow", 2, _pow, deterministic=True)
        dbapi_connection.create_function("floor", 1, _floor, deterministic=True)


def _pow(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else math.pow(x, y)


def _floor(x: float | None) -> float | None:
    return None if x is None else float(math.floor(x))


__all__ = [
    "INDEXED_TEXT_MAX_BYTES",
    "POSTGRESQL",
    "SQLITE",
    "compile_for",
    "engine_key",
    "ensure_math_functions",
    "fits_index",
    "greatest",
    "has_table",
    "insert_ignore",
    "is_postgresql",
    "least",
    "name_of",
    "named_dialect",
    "qmark",
    "remember",
    "total",
    "translate",
    "upsert",
]
