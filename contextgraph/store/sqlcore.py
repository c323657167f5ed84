"""Helpers for SQLAlchemy Core statements run in bulk (store layer).

- :func:`chunked` splits id lists for ``IN (...)`` clauses.
- :func:`driver_sql` compiles a Core statement once to the SQL text that
  ``Connection.exec_driver_sql`` runs with plain dicts (named parameters). For executemany over
  many thousands of rows, Core's per-row parameter processing costs more than SQLite itself
  (about 9 s of a 10,000-note cold sync), so bulk writes build their statement with Core and run
  it at the driver level. The text is SQLite's; :mod:`contextgraph.store.dialect` remembers how to
  build it, and a PostgreSQL engine runs its own compilation in its place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy.sql import ClauseElement

from contextgraph.store.dialect import SQLITE, compile_for, remember

T = TypeVar("T")

CHUNK = 500  # ids per IN (...) list; far below SQLite's bound-parameter limit


def chunked(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Yield consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


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


__all__ = ["CHUNK", "chunked", "driver_sql"]
