"""Helpers for SQLAlchemy Core statements run in bulk (store layer).

- :func:`chunked` splits id lists for ``IN (...)`` clauses; :class:`ForIds` and :class:`ByIds`
  run a statement for a list of ids that way, at the driver level (the id -> name, kind, path
  ... lookups, which BuildContext makes by the thousand), fetching plain tuples, on SQLite
  straight from the sqlite3 cursor.
- :func:`compiled_rows` (and :func:`compiled_tuples`) run a statement built on bound
  parameters, on SQLite as text compiled once per shape with its constants kept beside it
  (search's statements, BuildContext's neighbour lists).
- :func:`driver_sql` compiles a Core statement once to the SQL text that
  ``Connection.exec_driver_sql`` runs with plain dicts (named parameters). For executemany over
  many thousands of rows, Core's per-row parameter processing costs more than SQLite itself
  (about 9 s of a 10,000-note cold sync), so bulk writes build their statement with Core and run
  it at the driver level. The text is SQLite's; :mod:`contextgraph.store.dialect` remembers how to
  build it, and a PostgreSQL engine runs its own compilation in its place.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    CompoundSelect,
    Connection,
    Integer,
    Select,
    bindparam,
    func,
    select,
)
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.elements import BindParameter

from contextgraph.store.dialect import SQLITE, compile_for, is_postgresql, named_dialect, remember

T = TypeVar("T")
Query = Select[*tuple[Any, ...]] | CompoundSelect[*tuple[Any, ...]]  # a statement that returns rows
Statement = Query | UpdateBase  # a query, or a write (ForIds.execute)

CHUNK = 500  # ids per IN (...) list; far below SQLite's bound-parameter limit
ID_LIST = "id_list"  # the bound parameter of :class:`ForIds`' JSON array on SQLite
# What ForIds' builders put in their IN: a subquery of the ids (SQLite) or the ids' parameters.
IdList = Select[tuple[Any]] | list[BindParameter[Any]]


def chunked(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Yield consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _Compiled:
    """One statement compiled for SQLite once: its text, and the values of its constant
    parameters kept beside it, run at the driver level."""

    __slots__ = ("constants", "sql")

    def __init__(self, statement: Statement) -> None:
        compiled = statement.compile(dialect=named_dialect(SQLITE))
        self.sql, self.constants = str(compiled), dict(compiled.params)

    def rows(self, conn: Connection, values: dict[str, Any]) -> Sequence[Any]:
        return conn.exec_driver_sql(self.sql, {**self.constants, **values}).all()

    def tuples(self, conn: Connection, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        return _sqlite_cursor(conn).execute(self.sql, {**self.constants, **values}).fetchall()

    def run(self, conn: Connection, values: dict[str, Any]) -> None:
        _sqlite_cursor(conn).execute(self.sql, {**self.constants, **values})


def listed_on_sqlite(build: Callable[[IdList], Statement]) -> _Compiled:
    """``build(ids)`` compiled for SQLite, ``ids`` being ``SELECT value FROM json_each(:id_list)``:
    the one text of :class:`ForIds` and :class:`ForList`, whatever the list's length."""
    listed = func.json_each(bindparam(ID_LIST)).table_valued("value")
    return _Compiled(build(select(listed.c.value)))


class ForIds:
    """A statement over one list of ids, run in chunks of at most :data:`CHUNK` ids.

    ``build(ids)`` makes the statement from ``ids``, which stands for the id list in an ``IN``
    (``column.in_(ids)``, possibly inside a subquery); other bound parameters come with each
    call. A query's rows (:meth:`rows`) are plain tuples; a write (``INSERT … SELECT``: a
    sync's batch) runs with :meth:`execute`. The "ids" may be any scalars a JSON array holds
    (names and paths too).
    - On SQLite ``ids`` is ``SELECT value FROM json_each(:id_list)`` and a chunk arrives as one
      JSON array: the statement is built and compiled once for every list size, and binding one
      text costs less than binding hundreds of values (a 200-id name lookup: 530 → 270 µs).
      A CLI run pays the compilation of each statement it runs, so the size of the text matters
      as much: a list of 256 bound parameters took SQLAlchemy about 5 ms to build and compile.
    - On PostgreSQL ``ids`` is a list of bound parameters, the statement built once per list
      size, sizes padded to a power of two (a short chunk repeats its last id, which an ``IN``
      list ignores), so at most ten texts per statement.
    Core's per-call compilation of an expanding ``IN`` and its result processing cost about 2.5
    times what SQLite spends on such a lookup (5,000 names: 22 against 9 ms).
    """

    def __init__(self, build: Callable[[IdList], Statement]) -> None:
        self.build = build
        self._statements: dict[int, Statement] = {}
        self._sqlite: _Compiled | None = None

    def rows(
        self, conn: Connection, ids: Sequence[Any], params: dict[str, Any] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """The rows for each chunk of ``ids``, chunk after chunk."""
        if is_postgresql(conn):
            for size, values in self._padded(ids, params):
                yield from (tuple(row) for row in conn.execute(self._statement(size), values))
            return
        compiled = self._compiled()
        for values in self._listed(ids, params):
            yield from compiled.tuples(conn, values)

    def execute(
        self, conn: Connection, ids: Sequence[Any], params: dict[str, Any] | None = None
    ) -> None:
        """Run the statement, a write that returns no rows, for each chunk of ``ids``."""
        if is_postgresql(conn):
            for size, values in self._padded(ids, params):
                conn.execute(self._statement(size), values)
            return
        compiled = self._compiled()
        for values in self._listed(ids, params):
            compiled.run(conn, values)

    def _compiled(self) -> _Compiled:
        compiled = self._sqlite
        if compiled is None:
            compiled = self._sqlite = listed_on_sqlite(self.build)
        return compiled

    @staticmethod
    def _listed(ids: Sequence[Any], params: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        for chunk in chunked(ids):
            values: dict[str, Any] = {ID_LIST: json.dumps(list(chunk))}
            values.update(params or {})
            yield values

    @staticmethod
    def _padded(
        ids: Sequence[Any], params: dict[str, Any] | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        for chunk in chunked(ids):
            size = 1 << (len(chunk) - 1).bit_length()
            values = {f"id{i}": chunk[min(i, len(chunk) - 1)] for i in range(size)}
            values.update(params or {})
            yield size, values

    def _statement(self, size: int) -> Statement:
        statement = self._statements.get(size)
        if statement is None:
            ids: list[BindParameter[Any]] = [bindparam(f"id{i}") for i in range(size)]
            statement = self._statements[size] = self.build(ids)
        return statement


class ByIds(ForIds):
    """``query`` restricted to the rows whose ``key`` is one of the ids (see :class:`ForIds`)."""

    def __init__(self, query: Select[Any], key: ColumnElement[Any]) -> None:
        super().__init__(lambda ids: query.where(key.in_(ids)))


class ForList:
    """A query over one whole list of integer ids, run once, never in chunks.

    For a statement whose work for one id is not its own: the siblings' walk reads every
    neighbour's relations and keeps the rows of the candidates, so a run per chunk of
    candidates would read them all again per chunk. ``build(ids)`` puts ``ids`` in an ``IN``,
    as for :class:`ForIds`: on SQLite ``SELECT value FROM json_each(:id_list)`` (one JSON array,
    the text compiled once), on PostgreSQL ``SELECT unnest(:id_list)`` (one integer array, so no
    bound on the list's length).
    """

    def __init__(self, build: Callable[[IdList], Query]) -> None:
        self.build = build
        self._sqlite: _Compiled | None = None
        self._postgresql: Query | None = None

    def rows(
        self, conn: Connection, ids: Sequence[int], params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if is_postgresql(conn):
            if self._postgresql is None:
                listed = bindparam(ID_LIST, type_=ARRAY(Integer))
                self._postgresql = self.build(select(func.unnest(listed)))
            values = {ID_LIST: list(ids), **params}
            return [tuple(row) for row in conn.execute(self._postgresql, values)]
        if self._sqlite is None:
            self._sqlite = listed_on_sqlite(self.build)
        return self._sqlite.tuples(conn, {ID_LIST: json.dumps(list(ids)), **params})


# (statement name, shape...) -> the statement of that shape
_COMPILED: dict[Hashable, _Compiled] = {}
_COMPILED_MAX = 512
_compiled_lock = threading.Lock()


def _shaped(key: Hashable, build: Callable[[], Query]) -> _Compiled:
    entry = _COMPILED.get(key)
    if entry is None:
        entry = _Compiled(build())
        with _compiled_lock:
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            _COMPILED[key] = entry
    return entry


def compiled_rows(
    conn: Connection, key: Hashable, build: Callable[[], Query], values: dict[str, Any]
) -> Sequence[Any]:
    """The rows of ``build()`` with its bound parameters set from ``values``.

    On SQLite the statement is built and compiled once per ``key``, which must name everything
    its text depends on (``build`` may take no value of one call except through bound
    parameters), and runs at the driver level, without Core's per-call statement work (about as
    costly as a whole search's SQL). Another engine runs ``build()`` through Core.
    """
    if is_postgresql(conn):
        return conn.execute(build(), values).all()
    return _shaped(key, build).rows(conn, values)


def compiled_tuples(
    conn: Connection, key: Hashable, build: Callable[[], Query], values: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """:func:`compiled_rows` as plain tuples: on SQLite straight from the sqlite3 cursor, without
    SQLAlchemy's result objects (a few microseconds a row, more than SQLite spends on a row of
    an indexed join)."""
    if is_postgresql(conn):
        return [tuple(row) for row in conn.execute(build(), values)]
    return _shaped(key, build).tuples(conn, values)


def _sqlite_cursor(conn: Connection) -> sqlite3.Cursor:
    """A cursor of the sqlite3 connection under ``conn``, inside ``conn``'s transaction."""
    dbapi = conn.connection.dbapi_connection
    assert isinstance(dbapi, sqlite3.Connection)
    return dbapi.cursor()


def lazy_driver_sql(build: Callable[[], Any], *, literal_binds: bool = False) -> Callable[[], str]:
    """:func:`driver_sql` of ``build()``, compiled on the first call and kept: a module that
    defines its statements pays nothing for them at import (a command that runs none of them
    never compiles them)."""
    return functools.cache(lambda: driver_sql(build(), literal_binds=literal_binds))


def driver_sql(stmt: Any, *, literal_binds: bool = False) -> str:
    """The SQLite text of a Core statement, with ``:name`` parameters.

    ``stmt`` is a statement, or a function of the dialect name building one (for statements
    spelt per engine, such as upserts: see :mod:`contextgraph.store.dialect`). ``literal_binds``
    inlines constant values (for statements run on the DB-API cursor itself).
    """
    build = (lambda _dialect: stmt) if isinstance(stmt, ClauseElement) else stmt
    text = compile_for(build, SQLITE, literal_binds=literal_binds)
    remember(text, build, literal_binds)
    return text


__all__ = [
    "CHUNK",
    "ID_LIST",
    "ByIds",
    "ForIds",
    "ForList",
    "IdList",
    "chunked",
    "compiled_rows",
    "compiled_tuples",
    "driver_sql",
    "lazy_driver_sql",
    "listed_on_sqlite",
]
