"""The writes of a sync batch (store layer): files, mentions, concepts and co-occurrence counts.

:mod:`contextgraph.sync.run` decides what happens to each file (one :data:`FileOp` per file) and
opens the transaction; :func:`apply_ops` moves every file of a batch from its stored state to its
new one inside it. Nothing here marks derived state stale: the caller does that with
:mod:`contextgraph.store.meta` from the flags :func:`apply_ops` returns.

Bulk writes run at the driver level: each statement below is built with SQLAlchemy Core and
compiled once (:func:`~contextgraph.store.sqlcore.driver_sql`), then executed with plain dicts.
"""

from __future__ import annotations

import gc
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, partial
from itertools import combinations
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import (
    Connection,
    Select,
    bindparam,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.sql.dml import Insert as InsertStatement

from contextgraph.settings import Settings
from contextgraph.store.dialect import POSTGRESQL, SQLITE, insert_ignore, name_of, upsert
from contextgraph.store.fulltext import index_files
from contextgraph.store.meta import bump_version
from contextgraph.store.models import T_CREL, T_ENTITIES, T_FILES, T_MENTIONS
from contextgraph.store.sqlcore import ByIds, ForIds, IdList, chunked, compiled_tuples, driver_sql
from contextgraph.sync.coldload import fill_search_dates

if TYPE_CHECKING:
    from contextgraph.sync.ingest import Prepared


# --- what to do with one file -----------------------------------------------------------------


class Existing(NamedTuple):
    """A file as the store has it (a tuple: a no-change sync builds one per stored file)."""

    id: int
    kind: str
    size: int
    mtime_ns: int
    hash: str


@dataclass(frozen=True)
class Insert:
    """A file the store does not have yet."""

    path: str
    new: Prepared


@dataclass(frozen=True)
class Update:
    """A stored file whose content changed."""

    path: str
    old: Existing
    new: Prepared


@dataclass(frozen=True)
class Stat:
    """A stored file whose size or mtime changed but whose content did not."""

    path: str
    old: Existing
    new: Prepared


@dataclass(frozen=True)
class Rename:
    """A stored file that reappeared, unchanged, under the new ``path``."""

    path: str
    old: Existing
    new: Prepared


@dataclass(frozen=True)
class Delete:
    """A stored file that is gone (or no longer readable): everything it added is retracted."""

    path: str
    old: Existing


FileOp = Insert | Update | Stat | Rename | Delete


def stored_files(
    conn: Connection, source_id: int, paths: Sequence[str] | None = None
) -> dict[str, Existing]:
    """path -> the stored state of every file of a source (or of those of ``paths`` it has).

    A whole source (every sync, a no-change one too) is read from the sqlite3 cursor itself
    (:func:`~contextgraph.store.sqlcore.compiled_tuples`): Core's result rows cost about twice
    the query for 13,000 files, and even its driver-level result a third of it.
    """
    rows: Sequence[Any]
    if paths is None:
        rows = compiled_tuples(conn, ("stored_files",), _source_files_query, {"source": source_id})
    else:
        rows = list(_STORED_FILES_AT.rows(conn, paths, {"source": source_id}))
    return existing_of(rows)


def stored_under(conn: Connection, source_id: int, paths: Sequence[str]) -> bool:
    """Whether the store holds a file under any of ``paths`` taken as a folder (``p/...``):
    one range of the (source, path) index each."""
    files = T_FILES
    for path in paths:
        # Every path that starts with "p/" sorts from "p/" up to, not including, "p0".
        query = select(files.c.id).where(
            files.c.source_id == source_id,
            files.c.path >= path + "/",
            files.c.path < path + "0",
        )
        if conn.execute(query.limit(1)).first() is not None:
            return True
    return False


def existing_of(rows: Sequence[tuple[Any, ...]]) -> dict[str, Existing]:
    """path -> stored state, from rows of the stored files query (id, path, kind, size,
    mtime_ns, hash), as :func:`stored_files` reads them."""
    new = tuple.__new__  # an Existing without NamedTuple's Python-level __new__ (half the cost)
    return {
        path: new(Existing, (fid, kind, size, mtime_ns, digest))
        for fid, path, kind, size, mtime_ns, digest in rows
    }


def _stored_files_query() -> Select[tuple[int, str, str, int, int, str]]:
    return select(
        T_FILES.c.id,
        T_FILES.c.path,
        T_FILES.c.kind,
        T_FILES.c.size,
        T_FILES.c.mtime_ns,
        T_FILES.c.hash,
    )


def _source_files_query() -> Select[tuple[int, str, str, int, int, str]]:
    return _stored_files_query().where(T_FILES.c.source_id == bindparam("source"))


_STORED_FILES_AT = ByIds(_source_files_query(), T_FILES.c.path)  # of some paths of :source


# --- statements -------------------------------------------------------------------------------

_FILE_COLUMNS = (
    "size",
    "mtime_ns",
    "hash",
    "title",
    "created",
    "modified",
    "text",
    "facts",
    "search_meta",
    "search_parts",
    "concept_count",
    "pairs",
    "warning",
)


@dataclass(frozen=True)
class _Statements:
    """The driver-level SQL of a batch's bulk writes (SQLite text; PostgreSQL translates it)."""

    stat: str
    rename: str
    update_file: str
    insert_file: str
    insert_concept: str
    insert_mention: str
    sub_pair: str
    drop_pair: str


@cache
def _sql() -> _Statements:
    # Compiled on first use, not at import: a sync with nothing to write never needs them.
    return _Statements(
        stat=driver_sql(
            update(T_FILES)
            .where(T_FILES.c.id == bindparam("id_"))
            .values(
                size=bindparam("size"),
                mtime_ns=bindparam("mtime_ns"),
                modified=bindparam("modified"),
            )
        ),
        # A rename is an update that moves the row (it keeps its id, so ``last_accessed``):
        # the path's words are indexed, what a file is parsed as follows its name (a.py moved
        # to a.js is no longer Python, a module's name follows its folder), and a sync that
        # reads every file again (another extraction key) may find other facts in its bytes.
        rename=driver_sql(
            update(T_FILES)
            .where(T_FILES.c.id == bindparam("id_"))
            .values({c: bindparam(c) for c in ("path", *_FILE_COLUMNS)})
        ),
        update_file=driver_sql(
            update(T_FILES)
            .where(T_FILES.c.id == bindparam("id_"))
            .values({c: bindparam(c) for c in _FILE_COLUMNS})
        ),
        insert_file=driver_sql(
            insert(T_FILES).values(
                {
                    c: bindparam(c)
                    for c in ("source_id", "path", "kind", "last_accessed", *_FILE_COLUMNS)
                }
            )
        ),
        insert_concept=driver_sql(
            lambda d: insert_ignore(
                T_ENTITIES,
                ["kind", "key"],
                dialect=d,
                values={
                    "kind": bindparam("kind"),
                    "key": bindparam("k"),
                    "name": bindparam("k"),
                    "name_lower": bindparam("k"),
                },
            )
        ),
        insert_mention=driver_sql(
            insert(T_MENTIONS).values(
                file_id=bindparam("f"), concept_id=bindparam("c"), count=bindparam("n")
            )
        ),
        sub_pair=driver_sql(
            update(T_CREL)
            .where(T_CREL.c.a_id == bindparam("a"), T_CREL.c.b_id == bindparam("b"))
            .values(count=T_CREL.c.count - bindparam("n"))
        ),
        drop_pair=driver_sql(
            delete(T_CREL).where(
                T_CREL.c.a_id == bindparam("a"),
                T_CREL.c.b_id == bindparam("b"),
                T_CREL.c.count <= literal_column("0"),
            )
        ),
    )


# --- applying a batch -------------------------------------------------------------------------


def _changes_code(op: FileOp) -> bool:
    if isinstance(op, Stat):
        return False
    if not isinstance(op, Delete) and op.new.kind != "note":
        return True
    return not isinstance(op, Insert) and op.old.kind != "note"


def apply_ops(
    conn: Connection,
    settings: Settings,
    source_id: int,
    ops: list[FileOp],
    *,
    index_inserts: bool = False,
) -> tuple[bool, bool]:
    """Move every file of ``ops`` to its new state; return (concept graph changed, code changed).

    ``index_inserts``: SQLite's insert triggers of ``files`` are off (a cold load), so the
    inserted rows are indexed and their ``search_dates`` written here
    (:func:`contextgraph.store.fulltext.index_files`,
    :func:`contextgraph.sync.coldload.fill_search_dates`).

    The cyclic GC is paused meanwhile: a batch builds a parameter dict per file, mention and
    concept (tens of thousands), none of them in a reference cycle, and the collections they
    set off walked every object the process holds (about 0.1 s of a 13,415-note cold load).
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _apply_ops(conn, settings, source_id, ops, index_inserts)
    finally:
        if paused:
            gc.enable()


def _apply_ops(
    conn: Connection, settings: Settings, source_id: int, ops: list[FileOp], index_inserts: bool
) -> tuple[bool, bool]:
    code_changed = any(_changes_code(op) for op in ops)
    stats = [op for op in ops if isinstance(op, Stat)]
    renames = [op for op in ops if isinstance(op, Rename)]
    updates = [op for op in ops if isinstance(op, Update)]
    deletes = [op for op in ops if isinstance(op, Delete)]
    inserts = [op for op in ops if isinstance(op, Insert)]
    if stats:
        conn.exec_driver_sql(
            _sql().stat,
            [
                {
                    "id_": op.old.id,
                    "size": op.new.size,
                    "mtime_ns": op.new.mtime_ns,
                    "modified": op.new.mtime_ns / 1e9,
                }
                for op in stats
            ],
        )
    # An edit that leaves the concept counts alone leaves the graph alone (the common case).
    # A rename reads the same bytes, so its counts change only under another extraction key.
    rewritten: list[Update | Rename] = [*updates, *renames]
    old_concepts = concepts_of(conn, [op.old.id for op in rewritten])
    graph_updates: list[Update | Rename] = []
    for op in rewritten:
        new = dict(op.new.concepts)
        pairs = 1 if len(new) <= settings.max_concepts_per_file else 0
        old_map, old_pairs = old_concepts.get(op.old.id, ({}, 1))
        if new != old_map or (new and pairs != old_pairs):
            graph_updates.append(op)
    touched = retract(conn, [op.old.id for op in graph_updates] + [op.old.id for op in deletes])
    graph_changed = bool(touched)

    for chunk in chunked([op.old.id for op in deletes]):
        conn.execute(delete(T_FILES).where(T_FILES.c.id.in_(chunk)))
    if renames:
        conn.exec_driver_sql(
            _sql().rename,
            [
                {"id_": op.old.id, "path": op.path, **file_values(op.new, settings)}
                for op in renames
            ],
        )
    if updates:
        conn.exec_driver_sql(
            _sql().update_file,
            [{"id_": op.old.id, **file_values(op.new, settings)} for op in updates],
        )
    new_ids: dict[str, int] = {}
    if inserts:
        conn.exec_driver_sql(
            _sql().insert_file,
            [
                {
                    "source_id": source_id,
                    "path": op.path,
                    "kind": op.new.kind,
                    "last_accessed": None,
                    **file_values(op.new, settings),
                }
                for op in inserts
            ],
        )
        paths = [op.path for op in inserts]
        new_ids.update(_FILE_IDS.rows(conn, paths, {"source": source_id}))
        if index_inserts:
            inserted = sorted(new_ids.values())
            index_files(conn, inserted)
            fill_search_dates(conn, inserted)

    applied = [(op.old.id, op.new) for op in graph_updates]
    applied += [(new_ids[op.path], op.new) for op in inserts]
    applied = [(fid, p) for fid, p in applied if p.kind == "note" and p.concepts]
    if applied:
        graph_changed = True
        apply_concepts(conn, settings, applied)
    if touched:
        delete_orphan_concepts(conn, touched)
    if ops:
        bump_version(conn)  # reference times, mentions or counts may have changed
    return graph_changed, code_changed


def file_values(p: Prepared, settings: Settings) -> dict[str, Any]:
    """The ``files`` columns a freshly read file sets."""
    count = len(p.concepts)
    return {
        "size": p.size,
        "mtime_ns": p.mtime_ns,
        "hash": p.hash,
        "title": p.title,
        "created": p.created,
        "modified": p.mtime_ns / 1e9,
        "text": p.text,
        "facts": p.facts,
        "search_meta": p.search_meta,
        "search_parts": p.search_parts,
        "concept_count": count,
        "pairs": 1 if count <= settings.max_concepts_per_file else 0,
        "warning": "; ".join(p.warnings) or None,
    }


def concepts_of(conn: Connection, file_ids: list[int]) -> dict[int, tuple[dict[str, int], int]]:
    """The stored concept counts and pairs flag of each file."""
    out: dict[int, tuple[dict[str, int], int]] = {}
    for chunk in chunked(file_ids):
        flags = conn.execute(select(T_FILES.c.id, T_FILES.c.pairs).where(T_FILES.c.id.in_(chunk)))
        for fid, pairs in flags:
            out[fid] = ({}, int(pairs))
        rows = conn.execute(
            select(T_MENTIONS.c.file_id, T_ENTITIES.c.key, T_MENTIONS.c.count)
            .join(T_ENTITIES, T_ENTITIES.c.id == T_MENTIONS.c.concept_id)
            .where(T_MENTIONS.c.file_id.in_(chunk))
        )
        for fid, key, count in rows:
            out[fid][0][key] = count
    return out


def retract(conn: Connection, file_ids: list[int]) -> set[int]:
    """Remove the mentions and co-occurrences the given files contributed; return their concepts."""
    touched: set[int] = set()
    if not file_ids:
        return touched
    decrements: Counter[tuple[int, int]] = Counter()
    for chunk in chunked(file_ids):
        with_pairs = {
            r[0]
            for r in conn.execute(
                select(T_FILES.c.id).where(T_FILES.c.id.in_(chunk), T_FILES.c.pairs == 1)
            )
        }
        per_file: dict[int, list[int]] = defaultdict(list)
        for fid, cid in conn.execute(
            select(T_MENTIONS.c.file_id, T_MENTIONS.c.concept_id).where(
                T_MENTIONS.c.file_id.in_(chunk)
            )
        ):
            per_file[fid].append(cid)
            touched.add(cid)
        for fid, cids in per_file.items():
            if fid in with_pairs:
                decrements.update(combinations(sorted(cids), 2))
        conn.execute(delete(T_MENTIONS).where(T_MENTIONS.c.file_id.in_(chunk)))
    if decrements:
        rows = [{"a": a, "b": b, "n": n} for (a, b), n in sorted(decrements.items())]
        conn.exec_driver_sql(_sql().sub_pair, rows)
        conn.exec_driver_sql(_sql().drop_pair, [{"a": r["a"], "b": r["b"]} for r in rows])
    return touched


def apply_concepts(
    conn: Connection, settings: Settings, applied: list[tuple[int, Prepared]]
) -> None:
    """Insert the mentions of freshly read notes and add their co-occurrence pairs."""
    names = sorted({name for _, p in applied for name, _ in p.concepts})
    ids = _concept_ids(conn, names)
    missing = [name for name in names if name not in ids]  # in name order, as before
    if missing:
        conn.exec_driver_sql(_sql().insert_concept, [{"kind": "concept", "k": n} for n in missing])
        ids.update(_concept_ids(conn, missing))
    mentions = [{"f": f, "c": ids[name], "n": n} for f, p in applied for name, n in p.concepts]
    conn.exec_driver_sql(_sql().insert_mention, mentions)
    with_pairs = [fid for fid, p in applied if len(p.concepts) <= settings.max_concepts_per_file]
    _ADD_PAIRS[name_of(conn)].execute(conn, with_pairs)


def _concept_ids(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """name -> id of the given concepts the store has."""
    return dict(_CONCEPT_IDS.rows(conn, names))


def pairs_of(file_ids: Any, *, grouped: bool = True) -> Select[tuple[int, int, int]]:
    """(a_id, b_id, notes) of every concept pair the given files mention together, a < b.

    The counting runs in the database (one self-join of ``mentions``), not in Python. Not
    ``grouped``, it gives one row (count 1) per file and pair.
    """
    m1, m2 = T_MENTIONS.alias("m1"), T_MENTIONS.alias("m2")
    query = (
        select(m1.c.concept_id, m2.c.concept_id, func.count() if grouped else literal(1))
        .join_from(m1, m2, (m2.c.file_id == m1.c.file_id) & (m1.c.concept_id < m2.c.concept_id))
        .where(m1.c.file_id.in_(file_ids))
    )
    if not grouped:
        return query
    # Sorted as the pairs were when Python counted them: PostgreSQL keeps rows in insertion
    # order, and a read without a total ORDER BY (expand's ties) must still meet them so.
    pair = (m1.c.concept_id, m2.c.concept_id)
    return query.group_by(*pair).order_by(*pair)


# The lookups and the pair upsert of a batch, over its names, paths or file ids (ForIds:
# one text per statement on SQLite, the list bound as one JSON array).
_CONCEPT_IDS = ByIds(
    select(T_ENTITIES.c.key, T_ENTITIES.c.id).where(T_ENTITIES.c.kind == "concept"),
    T_ENTITIES.c.key,
)
_FILE_IDS = ByIds(
    select(T_FILES.c.path, T_FILES.c.id).where(T_FILES.c.source_id == bindparam("source")),
    T_FILES.c.path,
)


def _add_pairs(files: IdList, *, dialect: str) -> InsertStatement:
    """Add the pairs of ``files`` to ``concept_relations`` (an upsert).

    SQLite applies an upsert row by row, so it takes one row per file and pair and skips the
    grouping sort (sorting them by key did not pay either: a cold load of bench's 13,415 notes
    spent 1.21 s of CPU on them sorted against 1.14 s unsorted); PostgreSQL refuses to update one
    row twice in a statement, so it groups.
    """
    statement: InsertStatement = upsert(
        T_CREL,
        ["a_id", "b_id"],
        lambda excluded: {"count": T_CREL.c.count + excluded.count},
        dialect=dialect,
    ).from_select(["a_id", "b_id", "count"], pairs_of(files, grouped=dialect != SQLITE))
    return statement


_ADD_PAIRS = {
    dialect: ForIds(partial(_add_pairs, dialect=dialect)) for dialect in (SQLITE, POSTGRESQL)
}


def delete_orphan_concepts(conn: Connection, concept_ids: set[int]) -> None:
    """Delete the given concepts that no note mentions any more."""
    has_mention = (
        select(T_MENTIONS.c.concept_id).where(T_MENTIONS.c.concept_id == T_ENTITIES.c.id).exists()
    )
    for chunk in chunked(sorted(concept_ids)):
        conn.execute(
            delete(T_ENTITIES).where(
                T_ENTITIES.c.id.in_(chunk), T_ENTITIES.c.kind == "concept", ~has_mention
            )
        )


__all__ = [
    "Delete",
    "Existing",
    "FileOp",
    "Insert",
    "Rename",
    "Stat",
    "Update",
    "apply_ops",
    "existing_of",
    "retract",
    "stored_files",
    "stored_under",
]
