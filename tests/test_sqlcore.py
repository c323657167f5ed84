"""``store.sqlcore.ForIds`` and ``ForList``: a statement over an id list gives what Core's own
``IN`` gives, for every list size, on both engines (on SQLite the list travels as one JSON array,
on PostgreSQL ForList's as one integer array)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Select, bindparam, select

from contextgraph import ContextGraph
from contextgraph.store import db, sqlcore
from contextgraph.store.models import T_CREL, T_ENTITIES
from contextgraph.store.sqlcore import CHUNK, ByIds, ForIds, ForList, IdList, chunked
from tests.helpers import Writer

pytestmark = pytest.mark.engines("sqlite", "postgresql")

_NAMES = ByIds(select(T_ENTITIES.c.id, T_ENTITIES.c.name), T_ENTITIES.c.id)
_BY_NAME = ByIds(select(T_ENTITIES.c.name, T_ENTITIES.c.id), T_ENTITIES.c.name)


def _pairs_among(ids: IdList) -> Select[Any]:
    # The list twice in one statement, and a bound parameter of each call beside it.
    a, b = T_CREL.c.a_id, T_CREL.c.b_id
    return select(a, b, T_CREL.c.count).where(
        a.in_(ids), b.in_(ids), T_CREL.c.count >= bindparam("least")
    )


_PAIRS_AMONG = ForIds(_pairs_among)


def _graph(store: ContextGraph, vault: Path, write: Writer) -> list[int]:
    for i in range(12):
        links = " ".join(f"[[C{(i * 7 + k) % 30}]]" for k in range(5))
        write(f"n{i}.md", f"# N{i}\n\n{links}")
    store.sync([vault], name="v")
    with db.read(store.engine) as conn:
        return sorted(conn.execute(select(T_ENTITIES.c.id)).scalars())


@pytest.mark.parametrize("size", [1, 3, 17, CHUNK + 7])
def test_rows_equal_cores_own_in_for_every_list_size(
    store: ContextGraph, vault: Path, write: Writer, size: int
) -> None:
    ids = _graph(store, vault, write)
    # Ids of the store, missing ones and repeats, in no particular order.
    wanted = [ids[(i * 5) % len(ids)] if i % 3 else 10_000 + i for i in range(size)]
    with db.read(store.engine) as conn:
        got = sorted(_NAMES.rows(conn, wanted))
        expected = [  # chunk after chunk: an id repeated in two chunks comes twice
            tuple(row)
            for chunk in chunked(wanted)
            for row in conn.execute(
                select(T_ENTITIES.c.id, T_ENTITIES.c.name).where(T_ENTITIES.c.id.in_(chunk))
            )
        ]
        assert got == sorted(expected)
        assert got or size == 1
        among = ids[: min(size, len(ids))]
        a, b = T_CREL.c.a_id, T_CREL.c.b_id
        pairs = sorted(_PAIRS_AMONG.rows(conn, among, {"least": 1}))
        expected = conn.execute(select(a, b, T_CREL.c.count).where(a.in_(among), b.in_(among)))
        assert pairs == sorted(tuple(r) for r in expected)
        assert pairs or size == 1
        assert not list(_PAIRS_AMONG.rows(conn, among, {"least": 10_000}))


def test_text_keys_are_matched_as_text(store: ContextGraph, vault: Path, write: Writer) -> None:
    _graph(store, vault, write)
    with db.read(store.engine) as conn:
        found = dict(_BY_NAME.rows(conn, ["c3", "c4", "nope", "c3"]))
    assert sorted(found) == ["c3", "c4"]


@pytest.mark.sqlite_only
def test_sqlite_compiles_one_statement_for_every_list_size(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    ids = _graph(store, vault, write)
    lookup = ByIds(select(T_ENTITIES.c.id), T_ENTITIES.c.id)
    with db.read(store.engine) as conn:
        seen = set()
        for size in (1, 2, 5, 33, len(ids)):
            assert sorted(r[0] for r in lookup.rows(conn, ids[:size])) == ids[:size]
            seen.add(id(lookup._sqlite))
    assert len(seen) == 1 and "json_each" in str(lookup._sqlite and lookup._sqlite.sql)


_PAIRS_AMONG_ALL = ForList(_pairs_among)


@pytest.mark.parametrize("size", [1, 17, 3 * CHUNK])
def test_a_whole_list_gives_cores_own_in_in_one_statement(
    store: ContextGraph,
    vault: Path,
    write: Writer,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    """ForList: the rows of Core's IN over the whole list (a pair of ids from two different
    chunks of it included), with missing ids and repeats, from one execution."""
    ids = _graph(store, vault, write)
    wanted = [ids[(i * 5) % len(ids)] if i % 3 else 10_000 + i for i in range(size)]
    wanted[-1:] = ids  # every id, the last ones far past the first chunk
    runs: list[int] = []
    real = Connection.execute

    def counted(self: Connection, *args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real(self, *args, **kwargs)

    with db.read(store.engine) as conn:
        a, b = T_CREL.c.a_id, T_CREL.c.b_id
        query = select(a, b, T_CREL.c.count).where(a.in_(ids), b.in_(ids))
        expected = sorted(tuple(r) for r in conn.execute(query))
        assert expected
        original = sqlcore._Compiled.tuples
        monkeypatch.setattr(
            sqlcore._Compiled,
            "tuples",
            lambda self, c, values: runs.append(1) or original(self, c, values),
        )
        monkeypatch.setattr(Connection, "execute", counted)
        got = sorted(_PAIRS_AMONG_ALL.rows(conn, wanted, {"least": 1}))
    assert got == expected
    assert len(runs) == 1
