"""The ``meta`` table (store layer): stale marks, the graph version and the community id mark.

Every read and write of ``meta`` goes through this module, so its keys and their meaning are in
one place:

- ``stale:<what>`` — derived state ``<what>`` (``communities``, ``codegraph:<source id>``) must be
  recomputed. A sync batch that changes its inputs sets the row to ``1`` in the same transaction;
  the transaction that recomputes it deletes the row. A community recompute that runs outside the
  sync lock first stamps the row with a token (:func:`claim_stale`) and deletes it only while the
  token is still there (:func:`holds_claim`): any batch committed meanwhile has put ``1`` back.
- ``graph_version`` — a random token every writer that changes concepts, relations, reference
  times or communities replaces in its transaction; readers' caches are valid for one version.
- ``community_next_id`` — the high-water mark of community ids, so no id is ever given twice.
- ``linked:<source id>`` — present while the source's last walk followed a symlink: a sync of
  a few paths (a note write, a watcher's batch) then walks the whole source.
- ``extracted:<source id>`` — the extraction key its files are stored under
  (``Settings.extraction_key``): a sync that finds another one reads them all again.

Functions take a :class:`~sqlalchemy.Connection` inside the caller's transaction and never open
or commit one themselves.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, Select, bindparam, delete, select

from contextgraph.store.dialect import name_of, upsert
from contextgraph.store.models import T_META
from contextgraph.store.sqlcore import compiled_tuples

VERSION_KEY = "graph_version"
NEXT_COMMUNITY_ID_KEY = "community_next_id"
STALE_PREFIX = "stale:"
COMMUNITIES = "communities"  # the stale-mark name of the community partition


def code_graph(source_id: int) -> str:
    """The stale-mark name of the code graph of one source."""
    return f"codegraph:{source_id}"


def linked(source_id: int) -> str:
    """The key present while a source's last full walk followed a symlink (its files may be
    reached by more than one path, and only a walk tells which one the store keeps)."""
    return f"linked:{source_id}"


def mark_linked(conn: Connection, source_id: int, linked_now: bool) -> None:
    """Record whether ``source_id``'s walk followed a symlink (:func:`linked`)."""
    if linked_now:
        put(conn, linked(source_id), "1")
    else:
        remove(conn, linked(source_id))


def extracted(source_id: int) -> str:
    """The key under which a source's files were last extracted (``Settings.extraction_key``)."""
    return f"extracted:{source_id}"


def forget_source(conn: Connection, source_id: int) -> None:
    """Remove all that ``meta`` says of a source (its code graph's stale mark, its extraction
    key, its link flag): a source registered later may be given the same id."""
    clear_stale(conn, code_graph(source_id))
    remove(conn, extracted(source_id))
    remove(conn, linked(source_id))


def get(conn: Connection, key: str) -> str | None:
    """The value stored under ``key``, or None (a primary-key lookup every BuildContext makes
    twice: compiled once, run at the driver level)."""
    rows = compiled_tuples(conn, ("meta.get",), _get_statement, {"key": key})
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def _get_statement() -> Select[Any]:
    return select(T_META.c.value).where(T_META.c.key == bindparam("key"))


def put(conn: Connection, key: str, value: str) -> None:
    """Store ``value`` under ``key``, replacing what was there."""
    stmt = upsert(
        T_META,
        ["key"],
        lambda _excluded: {"value": value},
        dialect=name_of(conn),
        values={"key": key, "value": value},
    )
    conn.execute(stmt)


def remove(conn: Connection, key: str) -> None:
    """Remove ``key`` and its value (nothing happens when there is none)."""
    conn.execute(delete(T_META).where(T_META.c.key == key))


# --- stale marks ------------------------------------------------------------------------------


def mark_stale(conn: Connection, name: str) -> None:
    """Record that derived state ``name`` must be recomputed (overwrites any claim on it)."""
    put(conn, STALE_PREFIX + name, "1")


def clear_stale(conn: Connection, name: str) -> None:
    """Record that ``name`` was recomputed (call inside the recomputing transaction)."""
    remove(conn, STALE_PREFIX + name)


def is_stale(conn: Connection, name: str) -> bool:
    """True when ``name`` is marked stale (or claimed by a recompute that has not finished)."""
    return get(conn, STALE_PREFIX + name) is not None


def stale_marks(conn: Connection) -> list[str]:
    """The names of every derived state marked stale, sorted."""
    rows = conn.execute(stale_marks_statement())
    return [str(key)[len(STALE_PREFIX) :] for key in rows.scalars()]


def stale_marks_statement() -> Select[tuple[str]]:
    """The keys of every stale mark, sorted (:func:`stale_marks`)."""
    return select(T_META.c.key).where(T_META.c.key.startswith(STALE_PREFIX)).order_by(T_META.c.key)


def claim_stale(conn: Connection, name: str) -> str:
    """Stamp the stale mark of ``name`` with a fresh token and return it.

    The row stays present (the state still counts as stale) until :func:`clear_stale`; a writer
    that changes the inputs meanwhile overwrites the token with :func:`mark_stale`.
    """
    token = f"computing:{uuid.uuid4().hex}"
    put(conn, STALE_PREFIX + name, token)
    return token


def holds_claim(conn: Connection, name: str, token: str) -> bool:
    """True when the stale mark of ``name`` still carries ``token`` (nothing re-marked it)."""
    return get(conn, STALE_PREFIX + name) == token


# --- graph version ----------------------------------------------------------------------------


def bump_version(conn: Connection) -> None:
    """Invalidate every process's cache; call inside the transaction that changes the graph.

    The version is a random token, not a counter: a database deleted and rebuilt at the same
    path must never match a version cached from the old file.
    """
    put(conn, VERSION_KEY, uuid.uuid4().hex)


def graph_version(conn: Connection) -> str:
    """The current graph version (``"0"`` before any write)."""
    value = get(conn, VERSION_KEY)
    return "0" if value is None else value


# --- community ids ----------------------------------------------------------------------------


def next_community_id(conn: Connection) -> int | None:
    """The stored community id high-water mark, or None when absent or unreadable."""
    value = get(conn, NEXT_COMMUNITY_ID_KEY)
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def set_next_community_id(conn: Connection, value: int) -> None:
    """Store the community id high-water mark."""
    put(conn, NEXT_COMMUNITY_ID_KEY, str(value))


__all__ = [
    "COMMUNITIES",
    "bump_version",
    "claim_stale",
    "clear_stale",
    "code_graph",
    "get",
    "graph_version",
    "holds_claim",
    "is_stale",
    "mark_stale",
    "next_community_id",
    "put",
    "set_next_community_id",
    "stale_marks",
]
