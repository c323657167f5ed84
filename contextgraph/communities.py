"""Communities (SPEC §6): a partition of the concept co-occurrence graph, with stable ids.

The graph is read straight from SQL in one read transaction (concepts in name order, so vertex
``i`` is the ``i``-th concept by name), partitioned with igraph's Louvain
(``community_multilevel``) or Leiden (``community_leiden``, modularity objective) under a seeded
Python RNG, matched against the previous partition so ids survive recomputes, and written in one
short write transaction.

Determinism: the same names, edges and settings give the same partition in any process. igraph's
random number generator is global; :func:`detect` installs ``random.Random(seed)`` for the call only
and puts igraph's default (the :mod:`random` module) back afterwards — python-igraph has no getter,
so the previous generator cannot be read back; nothing in contextgraph installs another.

Stable ids: each new community takes the id of the previous community it overlaps most (Jaccard),
greedily from the best-overlapping pair down; the rest get fresh ids from a high-water mark kept in
``meta`` (``community_next_id``), so an id is never given to two different communities over time.

Race safety: a recompute runs outside the sync lock when asked for on demand, so a sync may commit
between its read and its write. At the start it stamps the ``stale:communities`` meta row with a
unique token; any sync batch that changes the graph overwrites that row with ``1``. The write
transaction clears the stale flag only when the token is still there and a cheap fingerprint of
the concept graph is unchanged; otherwise it still writes what it computed (concepts that vanished
are skipped, new ones keep ``community_id`` NULL) and leaves the flag for the next sync.
"""

from __future__ import annotations

import gc
import math
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import igraph
from sqlalchemy import Connection, Engine

from contextgraph import db
from contextgraph.dialect import qmark
from contextgraph.errors import InvalidArgument
from contextgraph.settings import COMMUNITY_ALGORITHMS, Settings

NEXT_ID_KEY = "community_next_id"
STALE_KEY = "stale:communities"
LEIDEN_ITERATIONS = 2  # igraph's default; each further pass costs about a Louvain run more

_rng_lock = threading.Lock()


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
# Pure parts


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Give igraph a generator seeded with ``seed`` for the duration of the block."""
    with _rng_lock:
        igraph.set_random_number_generator(random.Random(seed))
        try:
            yield
        finally:
            igraph.set_random_number_generator(random)


def _check(algorithm: str, resolution: float) -> None:
    if algorithm not in COMMUNITY_ALGORITHMS:
        raise InvalidArgument(f"algorithm must be one of {', '.join(COMMUNITY_ALGORITHMS)}")
    if not resolution > 0:
        raise InvalidArgument("resolution must be positive")


def _partition(
    n: int,
    pairs: list[tuple[int, int]],
    weights: list[float],
    *,
    algorithm: str,
    resolution: float,
    seed: int,
) -> tuple[list[int], float]:
    """Partition vertices ``0..n-1``; ``pairs``/``weights`` hold only positive, non-loop edges."""
    _check(algorithm, resolution)
    if not pairs:
        return list(range(n)), 0.0
    graph = igraph.Graph(n=n, edges=pairs, directed=False)
    graph.es["weight"] = weights
    with _seeded(seed):
        if algorithm == "louvain":
            clustering = graph.community_multilevel(weights="weight", resolution=resolution)
        else:
            clustering = graph.community_leiden(
                objective_function="modularity",
                weights="weight",
                resolution=resolution,
                n_iterations=LEIDEN_ITERATIONS,
            )
    raw: list[int] = clustering.membership
    degree: list[int] = graph.degree()
    # Renumber by first appearance in vertex (name) order; an isolated vertex is always alone.
    labels: dict[int, int] = {}
    membership = [0] * n
    for v in range(n):
        if degree[v] == 0:
            membership[v] = len(labels)
            labels[-1 - v] = membership[v]
            continue
        label = labels.get(raw[v])
        if label is None:
            label = labels[raw[v]] = len(labels)
        membership[v] = label
    modularity = float(graph.modularity(membership, weights="weight", resolution=1))
    return membership, (modularity if math.isfinite(modularity) else 0.0)


def detect(
    names: Sequence[str],
    edges: Sequence[tuple[int, int, float]],
    *,
    algorithm: str,
    resolution: float,
    seed: int,
) -> tuple[list[int], float]:
    """Partition a weighted graph; return ``(membership, modularity)``.

    Vertex ``i`` is ``names[i]`` (callers pass names sorted, which makes the result depend only on
    the graph); ``edges`` are ``(i, j, weight)``. Edges with a non-positive weight and self-loops
    are ignored. ``membership[i]`` is the community of vertex ``i``, numbered ``0, 1, ...`` by first
    appearance; every vertex without an edge is alone in its community. The modularity is igraph's
    standard (resolution 1) weighted modularity of that membership, ``0.0`` for an edgeless graph.
    """
    n = len(names)
    pairs: list[tuple[int, int]] = []
    weights: list[float] = []
    for i, j, w in edges:
        if not (0 <= i < n and 0 <= j < n):
            raise InvalidArgument(f"edge ({i}, {j}) names a vertex outside 0..{n - 1}")
        if i != j and w > 0:
            pairs.append((i, j))
            weights.append(w)
    return _partition(n, pairs, weights, algorithm=algorithm, resolution=resolution, seed=seed)


def assign_stable_ids(
    previous: Mapping[int, frozenset[str]],
    new: Sequence[frozenset[str]],
    next_id: int,
) -> dict[int, frozenset[str]]:
    """Give each new community an id, reusing the previous ids of the communities it continues.

    All (new, previous) pairs that share a member are ranked by Jaccard similarity desc, then the
    new community's size desc, then the previous id asc, then the new community's smallest member;
    going down that list a pair is matched when neither side is matched yet. Unmatched new
    communities get fresh ids ``next_id, next_id + 1, ...`` (raised above every previous id if
    needed) in order of size desc, then smallest member. Empty new communities are dropped.
    """
    communities = [c for c in new if c]
    owner: dict[str, int] = {}
    for cid, members in previous.items():
        for name in members:
            owner[name] = cid
    old_size = Counter(owner.values())
    smallest = [min(c) for c in communities]
    ranked: list[tuple[float, int, int, str, int]] = []
    for k, members in enumerate(communities):
        overlap = Counter(owner[name] for name in members if name in owner)
        for cid, inter in overlap.items():
            jaccard = inter / (len(members) + old_size[cid] - inter)
            ranked.append((-jaccard, -len(members), cid, smallest[k], k))
    ranked.sort()
    result: dict[int, frozenset[str]] = {}
    matched: set[int] = set()
    for _, _, cid, _, k in ranked:
        if k in matched or cid in result:
            continue
        result[cid] = communities[k]
        matched.add(k)
    fresh = max([next_id, *(cid + 1 for cid in previous)])
    rest = sorted(
        (k for k in range(len(communities)) if k not in matched),
        key=lambda k: (-len(communities[k]), smallest[k], k),
    )
    for k in rest:
        result[fresh] = communities[k]
        fresh += 1
    return result


# --------------------------------------------------------------------------------------------
# Store


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


_FINGERPRINT_CONCEPTS = "SELECT count(*), coalesce(sum(id), 0) FROM entities WHERE kind = 'concept'"
_FINGERPRINT_RELATIONS = "SELECT count(*), coalesce(sum(count), 0) FROM concept_relations"


def _fingerprint(conn: Connection) -> tuple[int, int, int, float]:
    concepts, id_sum = conn.exec_driver_sql(_FINGERPRINT_CONCEPTS).one()
    relations, weight = conn.exec_driver_sql(_FINGERPRINT_RELATIONS).one()
    return int(concepts), int(id_sum), int(relations), float(weight)


def _meta(conn: Connection, key: str) -> str | None:
    row = conn.exec_driver_sql(qmark(conn, "SELECT value FROM meta WHERE key = ?"), (key,)).first()
    return None if row is None else str(row[0])


def _set_meta(conn: Connection, key: str, value: str) -> None:
    conn.exec_driver_sql(
        qmark(
            conn,
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        ),
        (key, value),
    )


def _read(conn: Connection) -> _Snapshot:
    """Load the concept graph of the current read transaction as plain lists.

    This is the hot path for large graphs (a million edges): rows come from the DB-API cursor of
    the transaction's own connection, columns are split with ``zip`` and entity ids mapped to
    vertex indices with ``map``, all in C; the cyclic GC is paused meanwhile, since the millions
    of short-lived tuples would otherwise trigger it over and over for nothing.
    """
    raw = conn.connection.driver_connection
    assert raw is not None
    paused = gc.isenabled()
    gc.disable()
    try:
        concepts = raw.execute(
            "SELECT id, name, community_id FROM entities WHERE kind = 'concept' ORDER BY name, id"
        ).fetchall()
        ids: list[int] = [r[0] for r in concepts]
        names: list[str] = [r[1] for r in concepts]
        old: list[int | None] = [r[2] for r in concepts]
        del concepts
        index = {eid: i for i, eid in enumerate(ids)}
        rows = raw.execute("SELECT a_id, b_id, count FROM concept_relations").fetchall()
        relations = len(rows)
        pairs: list[tuple[int, int]] = []
        weights: list[float] = []
        total = 0.0
        if rows:
            a_col, b_col, w_col = zip(*rows, strict=True)
            del rows
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
    finally:
        if paused:
            gc.enable()
    stored = _meta(conn, NEXT_ID_KEY)
    highest = conn.exec_driver_sql(
        "SELECT coalesce(max(top), 0) FROM (SELECT max(id) AS top FROM communities"
        " UNION ALL SELECT max(community_id) FROM entities) AS tops"
    ).scalar_one()
    next_id = max(_as_int(stored, 1), int(highest) + 1)
    last_run = conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM community_runs").scalar_one()
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


def _as_int(value: str | None, default: int) -> int:
    try:
        return default if value is None else int(value)
    except ValueError:
        return default


def recompute(engine: Engine, settings: Settings) -> CommunityRunInfo:
    """Detect communities over the concept graph now, store them and record the run."""
    started = time.perf_counter()
    algorithm = settings.community_algorithm
    resolution = float(settings.community_resolution)
    seed = int(settings.community_seed)
    retry = settings.lock_retry_seconds
    _check(algorithm, resolution)
    token = f"computing:{uuid.uuid4().hex}"
    with db.write(engine, retry_seconds=retry) as conn:
        _set_meta(conn, STALE_KEY, token)
    with db.read(engine, retry_seconds=retry) as conn:
        snap = _read(conn)

    membership, modularity = _partition(
        len(snap.ids),
        snap.pairs,
        snap.weights,
        algorithm=algorithm,
        resolution=resolution,
        seed=seed,
    )
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

    with db.write(engine, retry_seconds=retry) as conn:
        last_run = conn.exec_driver_sql(
            "SELECT coalesce(max(id), 0) FROM community_runs"
        ).scalar_one()
        stored = _as_int(_meta(conn, NEXT_ID_KEY), 0)
        if stored > snap.next_id:
            # Another run committed fresh ids meanwhile: move ours past them (never reuse one).
            shift = stored - snap.next_id
            new_ids = [c + shift if c >= snap.next_id else c for c in new_ids]
            sizes = [(c + shift if c >= snap.next_id else c, s) for c, s in sizes]
            next_id += shift
        overtaken = last_run != snap.last_run
        if not overtaken:
            changed = [
                (cid, eid)
                for eid, cid, before in zip(snap.ids, new_ids, snap.old, strict=True)
                if cid != before
            ]
        else:  # another run rewrote the membership since our read: write every row
            changed = list(zip(new_ids, snap.ids, strict=True))
        if changed:
            conn.exec_driver_sql(
                qmark(
                    conn, "UPDATE entities SET community_id = ? WHERE id = ? AND kind = 'concept'"
                ),
                changed,
            )
        if changed:
            from contextgraph.neighbourhood import bump_version

            bump_version(conn)  # cached neighbourhoods carry community ids
        conn.exec_driver_sql("DELETE FROM communities")
        if sizes:
            conn.exec_driver_sql(
                qmark(conn, "INSERT INTO communities (id, size) VALUES (?, ?)"), sizes
            )
        _set_meta(conn, NEXT_ID_KEY, str(next_id))
        if overtaken:
            # Which of the two runs saw the newer graph is unknown: let the next sync redo it.
            _set_meta(conn, STALE_KEY, "1")
        elif _meta(conn, STALE_KEY) == token and _fingerprint(conn) == snap.fingerprint:
            from contextgraph.sync import clear_stale

            clear_stale(conn, "communities")
        created_at = settings.current_time().timestamp()
        seconds = time.perf_counter() - started
        values = (
            algorithm,
            resolution,
            seed,
            modularity,
            len(snap.ids),
            len(snap.pairs),
            len(sizes),
            seconds,
            created_at,
        )
        run_id = conn.exec_driver_sql(
            qmark(
                conn,
                "INSERT INTO community_runs (algorithm, resolution, seed, modularity, node_count,"
                " edge_count, community_count, seconds, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            ),
            values,
        ).scalar_one()
    return CommunityRunInfo(int(run_id), *values)


# --------------------------------------------------------------------------------------------
# Queries


_RUN_COLUMNS = (
    "id, algorithm, resolution, seed, modularity, node_count, edge_count, community_count,"
    " seconds, created_at"
)


def latest_run(conn: Connection) -> CommunityRunInfo | None:
    """Return the most recent run, or None when communities were never computed."""
    row = conn.exec_driver_sql(
        f"SELECT {_RUN_COLUMNS} FROM community_runs ORDER BY id DESC LIMIT 1"
    ).first()
    if row is None:
        return None
    return CommunityRunInfo(
        id=int(row[0]),
        algorithm=str(row[1]),
        resolution=float(row[2]),
        seed=int(row[3]),
        modularity=float(row[4]),
        node_count=int(row[5]),
        edge_count=int(row[6]),
        community_count=int(row[7]),
        seconds=float(row[8]),
        created_at=float(row[9]),
    )


def list_communities(conn: Connection) -> list[CommunityInfo]:
    """Return the current communities, largest first (then by id), each with its members.

    Sizes count the concepts that are members now; a community whose members have all been
    deleted since the run is left out (the next sync recomputes anyway).
    """
    members: dict[int, list[str]] = defaultdict(list)
    for cid, name in conn.exec_driver_sql(
        "SELECT e.community_id, e.name FROM entities e JOIN communities c ON c.id = e.community_id"
        " WHERE e.kind = 'concept' ORDER BY e.community_id, e.name"
    ):
        members[int(cid)].append(str(name))
    out = [CommunityInfo(cid, len(names), tuple(names)) for cid, names in members.items()]
    out.sort(key=lambda c: (-c.size, c.id))
    return out


def has_communities(conn: Connection) -> bool:
    """True when a run was recorded and at least one concept belongs to a community."""
    row = conn.exec_driver_sql(
        "SELECT EXISTS (SELECT 1 FROM community_runs) AND EXISTS (SELECT 1 FROM entities"
        " WHERE community_id IS NOT NULL AND kind = 'concept')"
    ).scalar_one()
    return bool(row)


__all__ = [
    "CommunityInfo",
    "CommunityRunInfo",
    "assign_stable_ids",
    "detect",
    "has_communities",
    "latest_run",
    "list_communities",
    "recompute",
]
