"""Helpers for SQLAlchemy Core statements run in bulk (store layer).

- :func:`chunked` splits id lists for ``IN (...)`` clauses.
- :func:`driver_sql` compiles a Core statement once to the SQL text that
  ``Connection.exec_driver_sql`` runs with plain dicts (named parameters). For executemany over
  many thousands of rows, Core's per-row parameter processing costs more than SQLite itself
  (about 9 s of a 10,000-note cold sync), so bulk writes build their statement with Core and run
  it at the driver level.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect

T = TypeVar("T")

CHUNK = 500  # ids per IN (...) list; far below SQLite's bound-parameter limit

_NAMED = sqlite_dialect(paramstyle="named")


def chunked(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Yield consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def driver_sql(stmt: Any, *, literal_binds: bool = False) -> str:
    """The SQLite text of a Core statement, with ``:name`` parameters.

    ``literal_binds`` inlines constant values (for statements run on the DB-API cursor itself).
    """
    kwargs = {"literal_binds": True} if literal_binds else {}
    return str(stmt.compile(dialect=_NAMED, compile_kwargs=kwargs))


__all__ = ["CHUNK", "chunked", "driver_sql"]
