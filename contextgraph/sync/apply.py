"""The writes of a sync batch (store layer): files, mentions, concepts and co-occurrence counts.

:mod:`contextgraph.sync.run` decides what happens to each file (one :data:`FileOp` per file) and
opens the transaction; :func:`apply_ops` moves every file of a batch from its stored state to its
new one inside it. Nothing here marks derived state stale: the caller does that with
:mod:`contextgraph.store.meta` from the flags :func:`apply_ops` returns.

Bulk writes run at the driver level: each statement below is built with SQLAlchemy Core and
compiled once (:func:`~contextgraph.store.sqlcore.driver_sql`), then executed with plain dicts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, literal_column, select, update

from contextgraph.settings import Settings
from contextgraph.store.dialect import insert_ignore, upsert
from contextgraph.store.meta import bump_version
from contextgraph.store.models import ConceptRelation, Entity, File, Mention, table_of
from contextgraph.store.sqlcore import chunked, driver_sql
from contextgraph.sync.ingest import Prepared

T_FILES = table_of(File)
T_ENTITIES = table_of(Entity)
T_MENTIONS = table_of(Mention)
T_CREL = table_of(ConceptRelation)


# --- what to do with one file -----------------------------------------------------------------


@dataclass(frozen=True)
class Existing:
    """A file as the store has it."""

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
    """path -> the stored state of every file of a source (or of those of ``paths`` it has)."""
    query = select(
        T_FILES.c.id,
        T_FILES.c.path,
        T_FILES.c.kind,
        T_FILES.c.size,
        T_FILES.c.mtime_ns,
        T_FILES.c.hash,
    ).where(T_FILES.c.source_id == source_id)
    chunks = (
        [query] if paths is None else [query.where(T_FILES.c.path.in_(c)) for c in chunked(paths)]
    )
    return {
        r.path: Existing(r.id, r.kind, r.size, r.mtime_ns, r.hash)
        for chunk in chunks
        for r in conn.execute(chunk)
    }


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
SQL_STAT = driver_sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values(size=bindparam("size"), mtime_ns=bindparam("mtime_ns"), modified=bindparam("modified"))
)
SQL_RENAME = driver_sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values(
        path=bindparam("path"),
        size=bindparam("size"),
        mtime_ns=bindparam("mtime_ns"),
        modified=bindparam("modified"),
        search_meta=bindparam("search_meta"),  # the path's words are indexed
    )
)
SQL_UPDATE_FILE = driver_sql(
    update(T_FILES)
    .where(T_FILES.c.id == bindparam("id_"))
    .values({c: bindparam(c) for c in _FILE_COLUMNS})
)
SQL_INSERT_FILE = driver_sql(
    insert(T_FILES).values(
        {c: bindparam(c) for c in ("source_id", "path", "kind", "last_accessed", *_FILE_COLUMNS)}
    )
)
SQL_INSERT_CONCEPT = driver_sql(
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
)
SQL_INSERT_MENTION = driver_sql(
    insert(T_MENTIONS).values(
        file_id=bindparam("f"), concept_id=bindparam("c"), count=bindparam("n")
    )
)
SQL_ADD_PAIR = driver_sql(
    lambda d: upsert(
        T_CREL,
        ["a_id", "b_id"],
        lambda excluded: {"count": T_CREL.c.count + excluded.count},
        dialect=d,
        values={"a_id": bindparam("a"), "b_id": bindparam("b"), "count": bindparam("n")},
    )
)
SQL_SUB_PAIR = driver_sql(
    update(T_CREL)
    .where(T_CREL.c.a_id == bindparam("a"), T_CREL.c.b_id == bindparam("b"))
    .values(count=T_CREL.c.count - bindparam("n"))
)
SQL_DROP_PAIR = driver_sql(
    delete(T_CREL).where(
        T_CREL.c.a_id == bindparam("a"),
        T_CREL.c.b_id == bindparam("b"),
        T_CREL.c.count <= literal_column("0"),
    )
)


# --- applying a batch -------------------------------------------------------------------------


def _changes_code(op: FileOp) -> bool:
    if isinstance(op, Stat):
        return False
    if not isinstance(op, Delete) and op.new.kind != "note":
        return True
    return not isinstance(op, Insert) and op.old.kind != "note"


def apply_ops(
    conn: Connection, settings: Settings, source_id: int, ops: list[FileOp]
) -> tuple[bool, bool]:
    """Move every file of ``ops`` to its new state; return (concept graph changed, code changed)."""
    code_changed = any(_changes_code(op) for op in ops)
    stats = [op for op in ops if isinstance(op, Stat)]
    renames = [op for op in ops if isinstance(op, Rename)]
    updates = [op for op in ops if isinstance(op, Update)]
    deletes = [op for op in ops if isinstance(op, Delete)]
    inserts = [op for op in ops if isinstance(op, Insert)]
    if stats:
        conn.exec_driver_sql(
            SQL_STAT,
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
    if renames:
        conn.exec_driver_sql(
            SQL_RENAME,
            [
                {
                    "id_": op.old.id,
                    "path": op.path,
                    "size": op.new.size,
                    "mtime_ns": op.new.mtime_ns,
                    "modified": op.new.mtime_ns / 1e9,
                    "search_meta": op.new.search_meta,
                }
                for op in renames
            ],
        )

    # An edit that leaves the concept counts alone leaves the graph alone (the common case).
    old_concepts = concepts_of(conn, [op.old.id for op in updates])
    graph_updates: list[Update] = []
    for op in updates:
        new = dict(op.new.concepts)
        pairs = 1 if len(new) <= settings.max_concepts_per_file else 0
        old_map, old_pairs = old_concepts.get(op.old.id, ({}, 1))
        if new != old_map or (new and pairs != old_pairs):
            graph_updates.append(op)
    touched = retract(conn, [op.old.id for op in graph_updates] + [op.old.id for op in deletes])
    graph_changed = bool(touched)

    for chunk in chunked([op.old.id for op in deletes]):
        conn.execute(delete(T_FILES).where(T_FILES.c.id.in_(chunk)))
    if updates:
        conn.exec_driver_sql(
            SQL_UPDATE_FILE,
            [{"id_": op.old.id, **file_values(op.new, settings)} for op in updates],
        )
    new_ids: dict[str, int] = {}
    if inserts:
        conn.exec_driver_sql(
            SQL_INSERT_FILE,
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
        for paths in chunked([op.path for op in inserts]):
            new_ids.update(
                conn.execute(
                    select(T_FILES.c.path, T_FILES.c.id).where(
                        T_FILES.c.source_id == source_id, T_FILES.c.path.in_(paths)
                    )
                ).all()
            )

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
        conn.exec_driver_sql(SQL_SUB_PAIR, rows)
        conn.exec_driver_sql(SQL_DROP_PAIR, [{"a": r["a"], "b": r["b"]} for r in rows])
    return touched


def apply_concepts(
    conn: Connection, settings: Settings, applied: list[tuple[int, Prepared]]
) -> None:
    """Insert the mentions of freshly read notes and add their co-occurrence pairs."""
    names = sorted({name for _, p in applied for name, _ in p.concepts})
    conn.exec_driver_sql(SQL_INSERT_CONCEPT, [{"kind": "concept", "k": n} for n in names])
    ids: dict[str, int] = {}
    for chunk in chunked(names):
        ids.update(
            conn.execute(
                select(T_ENTITIES.c.key, T_ENTITIES.c.id).where(
                    T_ENTITIES.c.kind == "concept", T_ENTITIES.c.key.in_(chunk)
                )
            ).all()
        )
    mention_rows = []
    increments: Counter[tuple[int, int]] = Counter()
    for fid, p in applied:
        cids = []
        for name, count in p.concepts:
            cid = ids[name]
            cids.append(cid)
            mention_rows.append({"f": fid, "c": cid, "n": count})
        if len(cids) <= settings.max_concepts_per_file:
            increments.update(combinations(sorted(cids), 2))
    conn.exec_driver_sql(SQL_INSERT_MENTION, mention_rows)
    if increments:
        conn.exec_driver_sql(
            SQL_ADD_PAIR, [{"a": a, "b": b, "n": n} for (a, b), n in sorted(increments.items())]
        )


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
    "retract",
    "stored_files",
]
