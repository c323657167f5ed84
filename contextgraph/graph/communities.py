"""Communities (SPEC §6): the stored partition of the concept graph, with stable ids.

The graph is read straight from SQL in one read transaction (concepts in name order, so vertex
``i`` is the ``i``-th concept by name), partitioned by
:func:`contextgraph.graph.partition.partition` under the configured seed, matched against the
previous partition with :func:`~contextgraph.graph.partition.assign_stable_ids` so ids survive
recomputes, and written in one short write transaction. Fresh ids come from the high-water
mark ``community_next_id`` in ``meta``.

Race safety: a recompute runs outside the sync lock when asked for on demand, so a sync may commit
between its read and its write. At the start it claims the ``communities`` stale mark with a
unique token (:func:`contextgraph.store.meta.claim_stale`); any sync batch that changes the
graph marks it stale again. The write transaction clears the mark only when the token is still
there and a cheap fingerprint of the concept graph is unchanged; otherwise it still writes what
it computed (concepts that vanished are skipped, new ones keep ``community_id`` NULL) and leaves
the mark for the next sync.
"""

from __future__ import annotations

import gc
import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.schema import CreateTable, DropTable

from contextgraph.settings import Settings
from contextgraph.store import db, meta
from contextgraph.store.dialect import greatest, is_postgresql
from contextgraph.store.dialect import total as float_total
from contextgraph.store.models import T_COMMUNITIES, T_CREL, T_ENTITIES, T_RUNS
from contextgraph.store.sqlcore import lazy_driver_sql


@dataclass(frozen=True)
class CommunityRunInfo:
    """One recorded community detection run."""

    id: int
    algorithm: str
    resolution: float
    seed: int
    modularity: float
    node_count: int
    edge_count: int
    community_count: int
    seconds: float
    created_at: float  # epoch seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "algorithm": self.algorithm,
            "resolution": self.resolution,
            "seed": self.seed,
            "modularity": self.modularity,
            "nodeCount": self.node_count,
            "edgeCount": self.edge_count,
            "communityCount": self.community_count,
            "seconds": self.seconds,
            "createdAt": datetime.fromtimestamp(self.created_at, UTC).isoformat(),
        }


@dataclass(frozen=True)
class CommunityInfo:
    """A current community: its stable id, its size and its members (concept names, sorted)."""

    id: int
    size: int
    members: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "size": self.size, "members": list(self.members)}


# --------------------------------------------------------------------------------------------
# Reading the graph


@dataclass(frozen=True)
class _Snapshot:
    ids: list[int]  # concept entity ids, in name order
    names: list[str]
    old: list[int | None]  # their community_id
    pairs: list[tuple[int, int]]
    weights: list[float]
    fingerprint: tuple[int, int, int, float]
    next_id: int
    last_run: int


_IS_CONCEPT = T_ENTITIES.c.kind == "concept"
# Run on the DB-API cursor of the transaction's connection (see _read), so compiled to text once.
_concepts_sql = lazy_driver_sql(
    lambda: (
        select(T_ENTITIES.c.id, T_ENTITIES.c.name, T_ENTITIES.c.community_id)
        .where(_IS_CONCEPT)
        .order_by(T_ENTITIES.c.name, T_ENTITIES.c.id)
    ),
    literal_binds=True,
)
_relations_sql = lazy_driver_sql(lambda: select(T_CREL.c.a_id, T_CREL.c.b_id, T_CREL.c.count))
# SQLite: the three columns as three JSON arrays of one scan, in the same row order. json.loads
# builds each list in C; fetching a row tuple per relation costs about twice as much (348k
# relations: 0.23 against 0.44 s).
_relation_arrays_sql = lazy_driver_sql(
    lambda: select(
        func.json_group_array(T_CREL.c.a_id),
        func.json_group_array(T_CREL.c.b_id),
        func.json_group_array(T_CREL.c.count),
    )
)
_LAST_RUN = select(func.coalesce(func.max(T_RUNS.c.id), 0))
_HIGHEST_ID = select(
    greatest(
        func.coalesce(select(func.max(T_COMMUNITIES.c.id)).scalar_subquery(), 0),
        func.coalesce(select(func.max(T_ENTITIES.c.community_id)).scalar_subquery(), 0),
    )
)


def _fingerprint(conn: Connection) -> tuple[int, int, int, float]:
    concepts, id_sum = conn.execute(
        select(func.count(), func.coalesce(func.sum(T_ENTITIES.c.id), 0)).where(_IS_CONCEPT)
    ).one()
    relations, weight = conn.execute(select(func.count(), float_total(T_CREL.c.count))).one()
    return int(concepts), int(id_sum), int(relations), float(weight)


def _read(conn: Connection) -> _Snapshot:
    """Load the concept graph of the current read transaction as plain lists.

    This is the hot path for large graphs (a million edges): rows come from the DB-API cursor of
    the transaction's own connection, the relations' columns as lists (on SQLite three JSON
    arrays, see :func:`_relation_columns`) and entity ids mapped to vertex indices with ``map``,
    all in C. Its caller, :func:`recompute`, pauses the cyclic GC: the millions of short-lived
    objects would otherwise trigger it over and over for nothing.
    """
    raw = conn.connection.driver_connection
    assert raw is not None
    concepts = raw.execute(_concepts_sql()).fetchall()
    ids: list[int] = [r[0] for r in concepts]
    names: list[str] = [r[1] for r in concepts]
    old: list[int | None] = [r[2] for r in concepts]
    del concepts
    index = {eid: i for i, eid in enumerate(ids)}
    a_col, b_col, w_col = _relation_columns(conn, raw)
    relations = len(a_col)
    pairs: list[tuple[int, int]] = []
    weights: list[float] = []
    total = 0.0
    if relations:
        total = float(sum(w_col))
        try:
            pairs = list(
                zip(map(index.__getitem__, a_col), map(index.__getitem__, b_col), strict=True)
            )
            weights = list(w_col)
            clean = min(weights) > 0
        except KeyError:  # an endpoint that is not a concept: take the slow, filtering path
            clean = False
        if not clean:
            pairs, weights = [], []
            for a, b, w in zip(a_col, b_col, w_col, strict=True):
                i, j = index.get(a), index.get(b)
                if i is not None and j is not None and i != j and w > 0:
                    pairs.append((i, j))
                    weights.append(w)
    stored = meta.next_community_id(conn)
    highest = conn.execute(_HIGHEST_ID).scalar_one()
    next_id = max(1 if stored is None else stored, int(highest) + 1)
    last_run = conn.execute(_LAST_RUN).scalar_one()
    return _Snapshot(
        ids=ids,
        names=names,
        old=old,
        pairs=pairs,
        weights=weights,
        fingerprint=(len(ids), sum(ids), relations, total),
        next_id=next_id,
        last_run=int(last_run),
    )


def _relation_columns(conn: Connection, raw: Any) -> tuple[Sequence[Any], ...]:
    """(a_ids, b_ids, counts) of every concept relation, in one scan's row order."""
    if is_postgresql(conn):
        rows = raw.execute(_relations_sql()).fetchall()
        return tuple(zip(*rows, strict=True)) if rows else ((), (), ())
    a_json, b_json, w_json = raw.execute(_relation_arrays_sql()).fetchone()
    return json.loads(a_json), json.loads(b_json), json.loads(w_json)


# --------------------------------------------------------------------------------------------
# Recomputing

# Bulk writes (one row per concept or community), compiled once and run at the driver level.
# The membership is written with one set statement: the (entity, community) pairs go into a
# temporary table (executemany of plain inserts, no index but its key), then a single
# ``UPDATE … FROM`` joins it to ``entities`` on the primary key. The table lives only inside the
# write transaction (created and dropped there), on SQLite and PostgreSQL alike.
_WRITEBACK = Table(
    "community_writeback",
    MetaData(),
    Column("eid", Integer, primary_key=True, autoincrement=False),
    Column("cid", Integer, nullable=False),
    prefixes=["TEMPORARY"],
)
_create_writeback_sql = lazy_driver_sql(lambda: CreateTable(_WRITEBACK))
_drop_writeback_sql = lazy_driver_sql(lambda: DropTable(_WRITEBACK))
_fill_writeback_sql = lazy_driver_sql(
    lambda: insert(_WRITEBACK).values(eid=bindparam("eid"), cid=bindparam("cid"))
)
_set_communities_sql = lazy_driver_sql(
    lambda: (
        update(T_ENTITIES)
        .where(T_ENTITIES.c.id == _WRITEBACK.c.eid, _IS_CONCEPT)
        .values(community_id=_WRITEBACK.c.cid)
    ),
    literal_binds=True,
)
_insert_community_sql = lazy_driver_sql(
    lambda: insert(T_COMMUNITIES).values(id=bindparam("cid"), size=bindparam("size"))
)


def _write_membership(conn: Connection, rows: list[dict[str, int]]) -> None:
    """Set ``community_id`` of every ``{"eid", "cid"}`` concept in one ``UPDATE … FROM``.

    Entities that are gone (or no longer concepts) match nothing and are skipped."""
    conn.exec_driver_sql(_create_writeback_sql())
    conn.exec_driver_sql(_fill_writeback_sql(), rows)
    conn.exec_driver_sql(_set_communities_sql())
    conn.exec_driver_sql(_drop_writeback_sql())


def recompute(
    engine: Engine,
    settings: Settings,
    meanwhile: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> CommunityRunInfo:
    """Detect communities over the concept graph now, store them and record the run.

    ``meanwhile()`` is entered once the run has claimed the stale mark, and left once the run is
    stored: the caller's work on a connection of its own overlaps the reading, the partition and
    the writing (a sync recreates its cold load's indexes and copies its WAL then,
    :func:`contextgraph.store.checkpoint.meanwhile`). igraph is imported in there too, by
    :func:`~contextgraph.graph.partition.partition`, so its 20-30 ms overlap that work rather
    than precede it. The run's write waits, as any writer does, while that work holds
    the write lock; the WAL copy blocks no writer. Leaving the block waits for that work.

    The cyclic GC stays paused throughout, not only while :func:`_read` runs: the graph's
    hundreds of thousands of edge tuples live until the run is stored, and every full collection
    meanwhile would walk them all for nothing (nothing here builds reference cycles).
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _recompute(engine, settings, meanwhile)
    finally:
        if paused:
            gc.enable()


def _recompute(
    engine: Engine, settings: Settings, meanwhile: Callable[[], AbstractContextManager[object]]
) -> CommunityRunInfo:
    # Not at module level: listing the stored communities never needs the partition.
    from contextgraph.graph.partition import check_arguments, partition

    started = time.perf_counter()
    algorithm = settings.community_algorithm
    resolution = float(settings.community_resolution)
    seed = int(settings.community_seed)
    retry = settings.lock_retry_seconds
    check_arguments(algorithm, resolution)
    with db.write(engine, retry_seconds=retry) as conn:
        token = meta.claim_stale(conn, meta.COMMUNITIES)
    with meanwhile():  # the caller's work beside the rest of the run
        with db.read(engine, retry_seconds=retry) as conn:
            snap = _read(conn)
        threshold = settings.community_leiden_min_edges
        if algorithm == "louvain" and 0 < threshold <= len(snap.pairs):
            algorithm = "leiden"  # recorded as such in the run

        membership, modularity = partition(
            len(snap.ids),
            snap.pairs,
            snap.weights,
            algorithm=algorithm,
            resolution=resolution,
            seed=seed,
        )
        new_ids, sizes, next_id = _stable_ids(snap, membership)

        with db.write(engine, retry_seconds=retry) as conn:
            last_run = conn.execute(_LAST_RUN).scalar_one()
            stored = meta.next_community_id(conn) or 0
            if stored > snap.next_id:
                # Another run committed fresh ids meanwhile: move ours past them (never reuse one).
                shift = stored - snap.next_id
                new_ids = [c + shift if c >= snap.next_id else c for c in new_ids]
                sizes = [(c + shift if c >= snap.next_id else c, s) for c, s in sizes]
                next_id += shift
            overtaken = last_run != snap.last_run
            if not overtaken:
                changed = [
                    {"cid": cid, "eid": eid}
                    for eid, cid, before in zip(snap.ids, new_ids, snap.old, strict=True)
                    if cid != before
                ]
            else:  # another run rewrote the membership since our read: write every row
                changed = [
                    {"cid": cid, "eid": eid} for cid, eid in zip(new_ids, snap.ids, strict=True)
                ]
            if changed:
                _write_membership(conn, changed)
                meta.bump_version(conn)  # cached neighbourhoods carry community ids
            conn.execute(delete(T_COMMUNITIES))
            if sizes:
                conn.exec_driver_sql(
                    _insert_community_sql(), [{"cid": cid, "size": size} for cid, size in sizes]
                )
            meta.set_next_community_id(conn, next_id)
            if overtaken:
                # Which of the two runs saw the newer graph is unknown: let the next sync redo it.
                meta.mark_stale(conn, meta.COMMUNITIES)
            elif (
                meta.holds_claim(conn, meta.COMMUNITIES, token)
                and _fingerprint(conn) == snap.fingerprint
            ):
                meta.clear_stale(conn, meta.COMMUNITIES)
            run: dict[str, Any] = {
                "algorithm": algorithm,
                "resolution": resolution,
                "seed": seed,
                "modularity": modularity,
                "node_count": len(snap.ids),
                "edge_count": len(snap.pairs),
                "community_count": len(sizes),
                "seconds": time.perf_counter() - started,
                "created_at": settings.current_time().timestamp(),
            }
            run_id = conn.execute(insert(T_RUNS).values(run).returning(T_RUNS.c.id)).scalar_one()
    return CommunityRunInfo(id=int(run_id), **run)


def _stable_ids(
    snap: _Snapshot, membership: list[int]
) -> tuple[list[int], list[tuple[int, int]], int]:
    """Each concept's community id (a previous one kept where its community continues), the
    (id, size) of every community, and the next fresh id."""
    from contextgraph.graph.partition import assign_stable_ids

    groups: dict[int, list[str]] = defaultdict(list)
    for name, label in zip(snap.names, membership, strict=True):
        groups[label].append(name)
    previous_groups: dict[int, list[str]] = defaultdict(list)
    for name, cid in zip(snap.names, snap.old, strict=True):
        if cid is not None:
            previous_groups[cid].append(name)
    assigned = assign_stable_ids(
        {cid: frozenset(members) for cid, members in previous_groups.items()},
        [frozenset(members) for members in groups.values()],
        snap.next_id,
    )
    community_of: dict[str, int] = {}
    for cid, members in assigned.items():
        for name in members:
            community_of[name] = cid
    next_id = max([snap.next_id, *(cid + 1 for cid in assigned)])
    sizes = sorted((cid, len(members)) for cid, members in assigned.items())
    new_ids = [community_of[name] for name in snap.names]
    return new_ids, sizes, next_id


# --------------------------------------------------------------------------------------------
# Queries


def latest_run(conn: Connection) -> CommunityRunInfo | None:
    """Return the most recent run, or None when communities were never computed."""
    row = conn.execute(select(T_RUNS).order_by(T_RUNS.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    return CommunityRunInfo(
        id=int(row.id),
        algorithm=str(row.algorithm),
        resolution=float(row.resolution),
        seed=int(row.seed),
        modularity=float(row.modularity),
        node_count=int(row.node_count),
        edge_count=int(row.edge_count),
        community_count=int(row.community_count),
        seconds=float(row.seconds),
        created_at=float(row.created_at),
    )


def list_communities(conn: Connection) -> list[CommunityInfo]:
    """Return the current communities, largest first (then by id), each with its members.

    Sizes count the concepts that are members now; a community whose members have all been
    deleted since the run is left out (the next sync recomputes anyway).
    """
    members: dict[int, list[str]] = defaultdict(list)
    rows = conn.execute(
        select(T_ENTITIES.c.community_id, T_ENTITIES.c.name)
        .join(T_COMMUNITIES, T_COMMUNITIES.c.id == T_ENTITIES.c.community_id)
        .where(_IS_CONCEPT)
        .order_by(T_ENTITIES.c.community_id, T_ENTITIES.c.name)
    )
    for cid, name in rows:
        members[int(cid)].append(str(name))
    out = [CommunityInfo(cid, len(names), tuple(names)) for cid, names in members.items()]
    out.sort(key=lambda c: (-c.size, c.id))
    return out


def has_communities(conn: Connection) -> bool:
    """True when a run was recorded and at least one concept belongs to a community."""
    assigned = select(T_ENTITIES.c.id).where(T_ENTITIES.c.community_id.is_not(None), _IS_CONCEPT)
    row = conn.execute(select(and_(select(T_RUNS.c.id).exists(), assigned.exists()))).scalar_one()
    return bool(row)


__all__ = [
    "CommunityInfo",
    "CommunityRunInfo",
    "has_communities",
    "latest_run",
    "list_communities",
    "recompute",
]
