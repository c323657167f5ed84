"""Graph expansion (SPEC §8): pull in what a retriever's seed entities depend on.

Kept from the reference design: the quality filter, the hub rule, the minimum traversable weight,
the score ``weight × 0.5 ** depth`` and the result order (depth, score desc, name). Fixed:

1. the BFS is layered, so every depth-d entity is taken before any at depth d+1;
2. seeds are visited first and never come back as results;
3. entities at ``max_depth`` are not queried;
4. the hub count is over distinct traversable neighbours, not raw relation rows;
5. seeds match case-insensitively (symbol name, file path, name or stem, normalised concept name);
6. the hub rule never stops a seed, only expansion *through* a hub reached from one.

One indexed SQL query per BFS layer fetches the neighbours of the whole layer in both directions:
code relations (``relations`` by ``src_id`` and by ``dst_id``) and concept co-occurrence
(``concept_relations`` by ``a_id`` and by ``b_id``; type ``co_occurs``, weight 1.0). The quality
filter applies to the entities expansion reaches, not to the seeds the caller named.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, literal, or_, select, union_all
from sqlalchemy.sql.elements import BindParameter

from contextgraph.errors import InvalidArgument
from contextgraph.graph.stopwords import STOPWORDS
from contextgraph.limits import (
    EXPAND_DIRECTIONS,
    EXPAND_MAX_DEPTH,
    EXPAND_MAX_NODES,
    EXPAND_MAX_SEEDS,
    NAME,
)
from contextgraph.notes.links import normalize
from contextgraph.settings import Settings
from contextgraph.store import db
from contextgraph.store.identity import file_uri
from contextgraph.store.models import T_CREL, T_ENTITIES, T_FILES, T_REL, T_SOURCES
from contextgraph.store.sqlcore import ByIds, ForIds, IdList, compiled_tuples


@dataclass(frozen=True)
class Expansion:
    entity: str
    kind: str
    relationship_type: str
    depth: int
    score: float
    via: str
    path: str | None
    uri: str | None = None  # memory:// URI of the file a code entity lives in

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "entity": self.entity,
            "kind": self.kind,
            "relationshipType": self.relationship_type,
            "depth": self.depth,
            "score": self.score,
            "via": self.via,
        }
        if self.kind != "concept":
            out["path"] = self.path
            out["uri"] = self.uri
        return out


@dataclass(frozen=True)
class ExpandResult:
    seeds: tuple[str, ...]
    matched: tuple[str, ...]
    results: tuple[Expansion, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "matchedSeeds": list(self.matched),
            "results": [r.as_dict() for r in self.results],
        }


def passes_quality(name: str, settings: Settings) -> bool:
    """The reference quality filter: long enough, not all digits, not a stopword."""
    bare = name.strip()
    if len(bare) < settings.expand_min_length or bare.isdigit():
        return False
    lowered = bare.lower()
    return lowered not in STOPWORDS and lowered not in settings.expand_stopwords


def match_seeds(conn: Connection, seeds: list[str]) -> dict[int, tuple[str, str, str | None]]:
    """Entities named by ``seeds``: id -> (name, kind, path)."""
    found: dict[int, tuple[str, str, str | None]] = {}
    for seed in seeds:
        lowered = seed.strip().lower()
        if not lowered:
            continue
        concept = normalize(seed)
        stem = db.escape_like(lowered)
        values = {
            "lowered": lowered,
            "stem_dot": stem + ".%",
            "in_dir_dot": "%/" + stem + ".%",
            "in_dir": "%/" + stem,
            "concept": concept,
        }
        key = ("expand.match_seeds", bool(concept))
        rows = compiled_tuples(
            conn, key, functools.partial(_match_statement, bool(concept)), values
        )
        for eid, name, kind, path in rows:
            if kind == "file" and not _is_stem_match(name.lower(), lowered):
                continue
            found[int(eid)] = (name, kind, path)
        if "." in lowered or "::" in lowered:
            for eid, name, kind, path in _qualified(conn, lowered):
                found[int(eid)] = (name, kind, path)
    return found


def _qualified(conn: Connection, lowered: str) -> list[tuple[Any, ...]]:
    """The symbols a qualified seed names: ``Class.method`` (a qualified name, or the end of
    one from a dot) or ``path::Class.method`` (a whole one), case-insensitively. Found by the
    last part's name (indexed), then the key's end: a symbol's key is ``<source id>:<path>::
    <qualified name>``.
    """
    last = lowered.rpartition("::")[2].rpartition(".")[2]
    if not last:
        return []
    tail = db.escape_like(lowered)
    # After a ':' covers both a whole qualified name (after "::") and a path and name (after
    # the source id's ':'); after a '.', the end of a longer qualified name.
    values = {"last": last, "whole": "%:" + tail, "nested": "%." + tail}
    return compiled_tuples(conn, "expand.qualified", _qualified_statement, values)


def _qualified_statement() -> Any:
    e = T_ENTITIES
    key = func.lower(e.c.key)
    return select(e.c.id, e.c.name, e.c.kind, e.c.path).where(
        e.c.kind == "symbol",
        e.c.name_lower == bindparam("last"),
        or_(
            key.like(bindparam("whole"), escape="\\"),
            key.like(bindparam("nested"), escape="\\"),
        ),
    )


def _match_statement(with_concept: bool) -> Any:
    """The entities a seed names (see :func:`match_seeds`' bound values): symbols and packages
    by name, files by name or stem, and (``with_concept``) the concept of that key."""
    e = T_ENTITIES
    lowered: BindParameter[str] = bindparam("lowered")
    conditions = [
        and_(e.c.kind.in_([literal("symbol"), literal("package")]), e.c.name_lower == lowered),
        and_(
            e.c.kind == "file",
            or_(
                e.c.name_lower == lowered,
                e.c.name_lower.like(bindparam("stem_dot"), escape="\\"),
                e.c.name_lower.like(bindparam("in_dir_dot"), escape="\\"),
                e.c.name_lower.like(bindparam("in_dir"), escape="\\"),
            ),
        ),
    ]
    if with_concept:
        conditions.append(and_(e.c.kind == "concept", e.c.key == bindparam("concept")))
    return select(e.c.id, e.c.name, e.c.kind, e.c.path).where(or_(*conditions))


def _is_stem_match(path: str, seed: str) -> bool:
    """Whether ``seed`` names the file at ``path`` (both lowered): its path, or the end of it
    from a folder boundary (its name: ``service.py`` names ``pkg/service.py``), either with or
    without the extension, or its stem (the name up to its first dot)."""
    if path == seed or path.endswith("/" + seed):
        return True
    name = path.rsplit("/", 1)[-1]
    stem = name.split(".", 1)[0] if "." in name else name
    return (
        stem == seed
        or path.rsplit(".", 1)[0] == seed
        or path.rsplit(".", 1)[0].endswith("/" + seed)
    )


def _layer_statement(ids: IdList, direction: str) -> Any:
    """Every traversable edge touching ``ids``: (from, to, type, weight, count, outward), the
    code edges of weight at least ``:min_weight``.

    ``direction`` "out" keeps the code edges from ``ids`` outward (what they use), "in" those
    pointing at them (what uses them); co-occurrence has no direction and is always kept.
    """
    r, c = T_REL, T_CREL
    one = literal(1.0)
    min_weight: BindParameter[float] = bindparam("min_weight")
    parts = []
    if direction in ("both", "out"):
        parts.append(
            select(r.c.src_id, r.c.dst_id, r.c.type, r.c.weight, literal(0), literal(1)).where(
                r.c.src_id.in_(ids), r.c.weight >= min_weight
            )
        )
    if direction in ("both", "in"):
        parts.append(
            select(r.c.dst_id, r.c.src_id, r.c.type, r.c.weight, literal(0), literal(0)).where(
                r.c.dst_id.in_(ids), r.c.weight >= min_weight
            )
        )
    parts += [
        select(c.c.a_id, c.c.b_id, literal("co_occurs"), one, c.c.count, literal(1)).where(
            c.c.a_id.in_(ids)
        ),
        select(c.c.b_id, c.c.a_id, literal("co_occurs"), one, c.c.count, literal(1)).where(
            c.c.b_id.in_(ids)
        ),
    ]
    return union_all(*parts)


def _layer_rows(
    conn: Connection, ids: list[int], min_weight: float, direction: str
) -> list[tuple[Any, ...]]:
    """The rows of :func:`_layer_statement` for ``ids`` (each edge once: ``ids`` are distinct,
    so a chunk's rows are no other chunk's)."""
    return list(_LAYERS[direction].rows(conn, ids, {"min_weight": min_weight}))


def _degree_statement(ids: IdList) -> Any:
    """(entity, distinct traversable neighbours both ways) of the entities ``ids`` with any."""
    layer = _layer_statement(ids, "both").subquery("layer")
    entity, neighbour = list(layer.c)[:2]
    return select(entity, func.count(neighbour.distinct())).group_by(entity)


def _degrees(conn: Connection, ids: list[int], min_weight: float) -> dict[int, int]:
    """Distinct traversable neighbours of each entity, both ways (how generic it is), counted
    in SQL: a layer's candidates around a hub have tens of thousands of relations between them,
    and only their counts are wanted."""
    rows = _DEGREES.rows(conn, ids, {"min_weight": min_weight})
    return {int(entity): int(degree) for entity, degree in rows}


def _rank_head(reached: dict[int, set[int]]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A candidate's rank before specificity and name: score, count, a relation before a mere
    ``defines``, reached from more of the frontier (each the higher first)."""
    return lambda t: (-t[0], -t[1], -t[2], -len(reached[t[4]]))


def _tied_in_room(ranked: list[Any], head: Any, room: int) -> list[int]:
    """The entities of every run of equal ``head`` keys that starts within the first ``room``
    places of ``ranked`` (sorted by ``head``) and holds more than one: the only ones whose order
    a further key can change among the places kept."""
    tied: list[int] = []
    start = 0
    while start < min(room, len(ranked)):
        key, end = head(ranked[start]), start + 1
        while end < len(ranked) and head(ranked[end]) == key:
            end += 1
        if end - start > 1:
            tied.extend(t[4] for t in ranked[start:end])
        start = end
    return tied


def expand(
    conn: Connection,
    seeds: list[str],
    *,
    settings: Settings,
    max_depth: int = 2,
    max_nodes: int = 20,
    direction: str = "both",
) -> ExpandResult:
    """Expand ``seeds`` breadth-first, layer by layer, through traversable relations.

    Within a layer and a score, a candidate reached only because an expanded file defines it
    ranks after the files and symbols that file is related to; then candidates reached from
    more of the frontier first, then the more specific (fewer neighbours), then by name.
    """
    clean = [s for s in seeds if isinstance(s, str) and s.strip()]
    if not clean:
        raise InvalidArgument("give at least one seed entity name")
    if len(clean) > EXPAND_MAX_SEEDS:
        raise InvalidArgument(f"at most {EXPAND_MAX_SEEDS} seeds")
    for seed in clean:
        NAME.check(seed)  # and a longer one would pass SQLite's LIKE pattern limit (50 KB)
    EXPAND_MAX_DEPTH.check(max_depth)
    EXPAND_MAX_NODES.check(max_nodes)
    if direction not in EXPAND_DIRECTIONS:
        raise InvalidArgument(f"direction must be one of {', '.join(EXPAND_DIRECTIONS)}")
    seed_entities = match_seeds(conn, clean)
    result_ids: list[int] = []
    names: dict[int, tuple[str, str, str | None]] = dict(seed_entities)
    visited = set(seed_entities)
    frontier = sorted(seed_entities)
    results: list[Expansion] = []
    for depth in range(1, max_depth + 1):
        if not frontier or len(results) >= max_nodes:
            break
        rows = _layer_rows(conn, frontier, settings.expand_min_weight, direction)
        order = _order_keys(conn, frontier)  # between equal edges: the via's, not row order
        neighbours: dict[int, set[int]] = {}
        for src, dst, *_ in rows:
            neighbours.setdefault(src, set()).add(dst)
        expandable = {
            n
            for n in frontier
            if n in seed_entities or len(neighbours.get(n, ())) <= settings.expand_hub_degree
        }
        # to -> (weight, count, not-only-defined, from, type); reached: to -> frontier ids
        best: dict[int, tuple[float, int, int, int, str]] = {}
        reached: dict[int, set[int]] = {}
        for src, dst, rtype, weight, count, outward in rows:
            if src not in expandable or dst in visited:
                continue
            reached.setdefault(dst, set()).add(src)
            related = 0 if rtype == "defines" and outward else 1
            candidate = (float(weight), int(count), related, src, str(rtype))
            current = best.get(dst)
            if current is None or _better(candidate, current, names, order):
                best[dst] = candidate
        _load_names(conn, [n for n in best if n not in names], names)
        ranked = [
            (weight * 0.5**depth, count, related, names[n][0], n, src, rtype)
            for n, (weight, count, related, src, rtype) in best.items()
            if passes_quality(names[n][0], settings)
        ]
        room = max_nodes - len(results)

        head = _rank_head(reached)
        # Then the more specific (fewer neighbours), then the name. The neighbour counts are
        # read only for the ties they can break within the room; both sorts are stable, so the
        # places kept are those of one sort by the whole key.
        ranked.sort(key=head)
        tied = _tied_in_room(ranked, head, room)
        degree = _degrees(conn, tied, settings.expand_min_weight) if tied else {}
        order = _order_keys(conn, tied) if tied else {}  # last: equal names (two __init__)
        ranked.sort(key=lambda t: (*head(t), degree.get(t[4], 0), t[3], order.get(t[4], "")))
        frontier = []
        for score, _count, _related, name, n, src, rtype in ranked[:room]:
            _, kind, path = names[n]
            results.append(Expansion(name, kind, rtype, depth, score, names[src][0], path))
            result_ids.append(n)
            visited.add(n)
            frontier.append(n)
        # Candidates that did not fit are not visited: a later layer may not reach them anyway,
        # since every layer is full once one candidate is cut.
    # Each layer was appended in its final order (score, then relevance): no re-sort by name.
    uris = _uris(conn, result_ids)
    results = [replace(r, uri=uris.get(n)) for r, n in zip(results, result_ids, strict=True)]
    matched = tuple(sorted({v[0] for v in seed_entities.values()}))
    return ExpandResult(tuple(clean), matched, tuple(results))


def _better(
    candidate: tuple[float, int, int, int, str],
    current: tuple[float, int, int, int, str],
    names: dict[int, tuple[str, str, str | None]],
    order: dict[int, str],
) -> bool:
    """Whether ``candidate`` (weight, count, not-only-defined, from, type) is the better edge to
    its entity: the heavier, then the more frequent, then a relation before a mere ``defines``;
    between equals, the ``via`` of the smaller name (then :func:`_order_keys`), then the smaller
    type, so the answer never depends on the order the rows came in."""
    if candidate[:3] != current[:3]:
        return candidate[:3] > current[:3]
    via, other = candidate[3], current[3]
    return (names[via][0], order.get(via, ""), candidate[4]) < (
        names[other][0],
        order.get(other, ""),
        current[4],
    )


def _order_keys(conn: Connection, ids: list[int]) -> dict[int, str]:
    """The last tie-break between entities: the key, less the source id it starts with
    (``rich/progress.py::BarColumn.__init__``), then the whole key (the same path in two
    sources). Every store of the same files agrees on it, which the ids do not (an incremental
    sync gives a re-added file new ones) nor the row order (it differs between SQLite and
    PostgreSQL)."""
    out: dict[int, str] = {}
    for eid, key in _KEYS.rows(conn, ids):
        head, sep, rest = str(key).partition(":")
        out[int(eid)] = f"{rest}\0{key}" if sep and head.isdigit() else str(key)
    return out


def _uris(conn: Connection, ids: list[int]) -> dict[int, str]:
    """The memory:// URI of the file each code entity lives in."""
    return {int(eid): file_uri(name, path) for eid, name, path in _URIS.rows(conn, ids)}


def _load_names(
    conn: Connection, ids: list[int], names: dict[int, tuple[str, str, str | None]]
) -> None:
    for eid, name, kind, path in _NAMES.rows(conn, ids):
        names[int(eid)] = (name, kind, path)


_URIS = ByIds(
    select(T_ENTITIES.c.id, T_SOURCES.c.name, T_FILES.c.path)
    .join(T_FILES, T_FILES.c.id == T_ENTITIES.c.file_id)
    .join(T_SOURCES, T_SOURCES.c.id == T_FILES.c.source_id),
    T_ENTITIES.c.id,
)
_KEYS = ByIds(select(T_ENTITIES.c.id, T_ENTITIES.c.key), T_ENTITIES.c.id)
_NAMES = ByIds(
    select(T_ENTITIES.c.id, T_ENTITIES.c.name, T_ENTITIES.c.kind, T_ENTITIES.c.path),
    T_ENTITIES.c.id,
)

# One statement per direction, built and compiled on first use.
_LAYERS = {
    direction: ForIds(functools.partial(_layer_statement, direction=direction))
    for direction in EXPAND_DIRECTIONS
}
_DEGREES = ForIds(_degree_statement)


__all__ = ["STOPWORDS", "ExpandResult", "Expansion", "expand", "passes_quality"]
