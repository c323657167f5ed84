"""BuildContext (SPEC §5): what belongs with a concept, ranked, expanded and grouped.

Every step is an indexed SQL neighbour query: the notes that mention a concept (``mentions`` by
concept), then the other concepts those notes mention (``mentions`` by file), aggregated in SQLite
with the decay weight computed in SQL. Nothing loads the whole graph, and nothing here writes.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, bindparam, func, select

from contextgraph.errors import InvalidArgument
from contextgraph.graph.decay import reference_sql
from contextgraph.graph.neighbourhood import Neighbourhoods, Scored, weighted_score
from contextgraph.graph.relationsql import cooccurrences
from contextgraph.limits import CONTEXT_DEPTH, CONTEXT_MAX_ENTITIES
from contextgraph.notes.links import normalize
from contextgraph.settings import Settings
from contextgraph.store.identity import file_uri_sql
from contextgraph.store.models import T_ENTITIES, T_FILES, T_SOURCES
from contextgraph.store.sqlcore import ByIds, ForIds, IdList, compiled_tuples

MAX_FILES_PER_RELATION = 3
_WRAPPED = re.compile(r"^\s*!?\[\[.*\]\]\s*$", re.DOTALL)


@dataclass(frozen=True)
class DirectRelation:
    name: str
    co_occurrence_count: int
    decay_weight: float
    weighted_score: float
    files: tuple[str, ...]
    community_id: int | None
    content_preview: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "coOccurrenceCount": self.co_occurrence_count,
            "decayWeight": self.decay_weight,
            "weightedScore": self.weighted_score,
            "files": list(self.files),
            "communityId": self.community_id,
        }
        if self.content_preview is not None:
            out["contentPreview"] = self.content_preview
        return out


@dataclass(frozen=True)
class ExpandedRelation:
    name: str
    depth: int
    via: str
    co_occurrence_count: int
    weighted_score: float
    community_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "depth": self.depth,
            "via": self.via,
            "coOccurrenceCount": self.co_occurrence_count,
            "weightedScore": self.weighted_score,
            "communityId": self.community_id,
        }


@dataclass(frozen=True)
class CommunitySibling:
    name: str
    community_id: int
    shared_neighbor_count: int
    normalized_overlap: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "communityId": self.community_id,
            "sharedNeighborCount": self.shared_neighbor_count,
            "normalizedOverlap": self.normalized_overlap,
        }


@dataclass(frozen=True)
class Context:
    concept_name: str
    depth: int
    community_id: int | None = None
    direct_relations: tuple[DirectRelation, ...] = ()
    expanded_relations: tuple[ExpandedRelation, ...] = ()
    community_siblings: tuple[CommunitySibling, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "conceptName": self.concept_name,
            "depth": self.depth,
            "communityId": self.community_id,
            "directRelations": [r.as_dict() for r in self.direct_relations],
            "expandedRelations": [r.as_dict() for r in self.expanded_relations],
            "communitySiblings": [s.as_dict() for s in self.community_siblings],
        }


def concept_key(name: str) -> str:
    """Normalise a concept as typed: ``Machine Learning`` and ``[[Machine Learning|ML]]`` agree."""
    if _WRAPPED.match(name):
        from contextgraph.notes.wikilinks import find_links  # the markdown parser: only when needed

        links = find_links(name.strip())
        if links:
            return links[0].concept
    return normalize(name)


def find_concept(conn: Connection, concept: str) -> tuple[str, tuple[int, int | None] | None]:
    """Normalise ``concept``; return its key and (id, community id), or None when unknown."""
    key = concept_key(concept)
    if not key:
        raise InvalidArgument("the concept name is empty once normalised")
    rows = compiled_tuples(conn, ("find_concept",), _find_statement, {"key": key})
    return key, None if not rows else (int(rows[0][0]), rows[0][1])


def _find_statement() -> Select[Any]:
    concept = T_ENTITIES.c
    return select(concept.id, concept.community_id).where(
        concept.kind == "concept", concept.key == bindparam("key")
    )


@dataclass(frozen=True)
class _Neighbour:
    id: int
    name: str
    co: int
    dw: float
    community_id: int | None

    @property
    def score(self) -> float:
        return self.co * self.dw


def build_context(
    conn: Connection,
    concept: str,
    *,
    settings: Settings,
    now: float,
    depth: int = 2,
    max_entities: int = 20,
    include_content: bool = False,
) -> Context:
    """Answer "what belongs with ``concept``?" (see SPEC §5 for every rule)."""
    CONTEXT_DEPTH.check(depth)
    CONTEXT_MAX_ENTITIES.check(max_entities)
    key, found = find_concept(conn, concept)
    if found is None:
        return Context(concept_name=key, depth=depth)
    qid, community_id = found

    nb = Neighbourhoods(conn.engine, conn, settings, now)
    scored = nb.ranked(qid)
    top: list[int] = []
    while len(top) < max_entities and (n := scored.at(len(top))) is not None:
        top.append(n)
    names = nb.names(top)
    listed = [_neighbour(n, scored.edges[n], names[n]) for n in top]
    files = _top_files(conn, qid, [n.id for n in listed], settings, now)
    previews: dict[int, dict[str, str]] = {}
    if include_content:
        previews = _previews(conn, key, listed, files, settings)
    direct = tuple(
        DirectRelation(
            name=n.name,
            co_occurrence_count=n.co,
            decay_weight=n.dw,
            weighted_score=n.score,
            files=tuple(uri for uri, _ in files.get(n.id, [])),
            community_id=n.community_id,
            content_preview=previews.get(n.id, {}) if include_content else None,
        )
        for n in listed
    )
    expanded: tuple[ExpandedRelation, ...] = ()
    if depth > 1 and scored.at(0) is not None:
        if scored.complete:
            counts = {n: edge[0] for n, edge in scored.edges.items()}
            frontier = _strongest(nb, counts, settings.expansion_frontier)
            seen = {qid, *scored.edges}
        else:  # a prefix of a precomputed list: the same neighbours and counts, stored
            adjacent = nb.adjacency(qid)
            frontier = _strongest(nb, adjacent, settings.expansion_frontier)
            seen = {qid, *adjacent}
        expanded = _expand(nb, frontier, seen, depth, max_entities)
    siblings: tuple[CommunitySibling, ...] = ()
    if community_id is not None:
        siblings = community_siblings(nb, qid, community_id, settings)
    return Context(key, depth, community_id, direct, expanded, siblings)


def _strongest(nb: Neighbourhoods, adjacent: dict[int, int], count: int) -> list[int]:
    """The ``count`` neighbours with the highest co-occurrence counts (ties: name)."""
    if count <= 0 or not adjacent:
        return []
    cut = sorted(adjacent.values(), reverse=True)[min(count, len(adjacent)) - 1]
    pool = [n for n, w in adjacent.items() if w >= cut]
    names = nb.names(pool)
    return sorted(pool, key=lambda n: (-adjacent[n], names[n][0]))[:count]


def _neighbour(n: int, edge: tuple[int, float], info: tuple[str, int | None]) -> _Neighbour:
    co, total = edge
    return _Neighbour(n, info[0], co, total / co, info[1])


def _top_files(
    conn: Connection, qid: int, ids: list[int], settings: Settings, now: float
) -> dict[int, list[tuple[str, int]]]:
    """Up to three source-file URIs per listed relation, most recent reference time first."""
    if not ids:
        return {}
    out: dict[int, list[tuple[str, int]]] = {}
    for n, u, fid in _TOP_FILES.rows(conn, ids, {"qid": qid}):
        out.setdefault(n, []).append((u, fid))
    return out


def _top_files_statement(ids: IdList) -> Select[Any]:
    """The files of the relations of ``:qid`` with ``ids``: (neighbour, uri, file id), ranked."""
    joined, m1, m2, f = cooccurrences()
    s = T_SOURCES.alias("s")
    uri = file_uri_sql(s.c.name, f.c.path)
    ref = reference_sql(f)
    ranked = (
        select(
            m2.c.concept_id.label("n"),
            uri.label("uri"),
            f.c.id.label("file_id"),
            func.row_number()
            .over(partition_by=m2.c.concept_id, order_by=(ref.desc(), uri.asc()))
            .label("rank"),
        )
        .select_from(joined.join(s, s.c.id == f.c.source_id))
        .where(
            m1.c.concept_id == bindparam("qid"),
            m2.c.concept_id.in_(ids),
        )
        .subquery()
    )
    return (
        select(ranked.c.n, ranked.c.uri, ranked.c.file_id)
        .where(ranked.c.rank <= MAX_FILES_PER_RELATION)
        .order_by(ranked.c.n, ranked.c.rank)
    )


_TOP_FILES = ForIds(_top_files_statement)


# files previewed: their text, and its content hash (notes.preview.note_of keeps notes by it)
_PREVIEW_TEXTS = ByIds(select(T_FILES.c.id, T_FILES.c.hash, T_FILES.c.text), T_FILES.c.id)


def _previews(
    conn: Connection,
    key: str,
    listed: list[_Neighbour],
    files: dict[int, list[tuple[str, int]]],
    settings: Settings,
) -> dict[int, dict[str, str]]:
    from contextgraph.notes.preview import content_preview, note_of  # loads the markdown parser

    ids = sorted({fid for entries in files.values() for _, fid in entries})
    # Read once: the neighbours of a concept often share its notes (up to 3 × max_entities
    # quotes of one long note), and finding a note's links may take a whole markdown parse;
    # note_of keeps the notes it read for the next calls of the process.
    notes = {
        fid: note_of(digest, text)
        for fid, digest, text in _PREVIEW_TEXTS.rows(conn, ids)
        if text is not None
    }
    out: dict[int, dict[str, str]] = {}
    for n in listed:
        previews: dict[str, str] = {}
        for uri, fid in files.get(n.id, []):
            note = notes.get(fid)
            if note is None:
                continue  # unreadable or not stored: skipped silently, as specified
            previews[uri] = content_preview(note, n.name, key, limit=settings.preview_chars)
        out[n.id] = previews
    return out


def _expand(
    nb: Neighbourhoods, frontier: list[int], seen: set[int], depth: int, max_entities: int
) -> tuple[ExpandedRelation, ...]:
    """Layered expansion from the strongest direct relations (by co-occurrence count).

    Per hop: the unseen neighbours of the frontier, each with the frontier neighbour it shares
    the highest count with as ``via`` (ties: name); ranked by the weightedScore of that edge,
    then name; as many as fit; the kept ones are the next frontier. When every frontier list is
    whole, all candidates are ranked at once (:func:`_hop_of_whole_lists`); else the lists are
    merged in that order (:func:`_hop_merged`), which reads a prefix only as far as it must.
    """
    out: list[ExpandedRelation] = []
    seen = set(seen)
    for hop in range(2, depth + 1):
        budget = max_entities - len(out)
        if budget <= 0 or not frontier:
            break
        frontier = nb.reaching_past(frontier, seen)  # the others add nothing to this hop
        lists = {v: nb.ranked(v, skipping=seen) for v in frontier}
        names = nb.names(frontier)  # reading a list loads the names of its neighbours too
        if all(sc.complete for sc in lists.values()):
            found = _hop_of_whole_lists(nb, lists, names, seen, budget)
        else:
            found = _hop_merged(nb, lists, names, seen, budget)
        frontier = []
        for c, via in found:
            co, total = lists[via].edges[c]
            score = weighted_score((co, total))
            out.append(ExpandedRelation(names[c][0], hop, names[via][0], co, score, names[c][1]))
            seen.add(c)
            frontier.append(c)
    return tuple(out)


def _hop_of_whole_lists(
    nb: Neighbourhoods,
    lists: dict[int, Scored],
    names: dict[int, tuple[str, int | None]],
    seen: set[int],
    budget: int,
) -> list[tuple[int, int]]:
    """The kept (candidate, via) of one hop from complete lists, in their final order.

    Every candidate's via comes from one pass over the lists (a higher count wins; on a tie the
    first name, then the first in the frontier, as ``min`` over the frontier would give), the
    candidates are cut by score, and only those up to the cut, with the ties there, are named
    and ordered: by score, then name, then as a merge of the lists would meet them (via, then
    the via list's own rank: count desc, id). No list is ranked, and only the kept are named:
    on the real corpora a hop costs a third of the merge's CPU, at every size of its lists.
    """
    best: dict[int, tuple[int, int]] = {}  # candidate -> (count with its via, via)
    for u in sorted(lists, key=lambda u: names[u][0]):  # stable: the frontier's order on a tie
        for c, (co, _total) in lists[u].edges.items():
            if c not in seen:
                known = best.get(c)
                if known is None or co > known[0]:
                    best[c] = (co, u)
    score = {c: weighted_score(lists[u].edges[c]) for c, (_co, u) in best.items()}
    chosen = sorted(best, key=score.__getitem__, reverse=True)
    if len(chosen) > budget:
        cut = score[chosen[budget - 1]]
        end = budget
        while end < len(chosen) and score[chosen[end]] == cut:
            end += 1
        chosen = chosen[:end]
    names = nb.names(chosen)
    chosen.sort(key=lambda c: (-score[c], names[c][0], best[c][1], -best[c][0], c))
    return [(c, best[c][1]) for c in chosen[:budget]]


def _hop_merged(
    nb: Neighbourhoods,
    lists: dict[int, Scored],
    names: dict[int, tuple[str, int | None]],
    seen: set[int],
    budget: int,
) -> list[tuple[int, int]]:
    """The kept (candidate, via) of one hop, in their final order, by a k-way merge of the
    lists, each read by score, then name (:func:`_by_score`): it stops as soon as the hop is
    full. A candidate's counts with lists that are prefixes come from the stored relations."""
    frontier = list(lists)
    lazy = [v for v in frontier if not lists[v].complete]
    walks = {v: _by_score(sc, names) for v, sc in lists.items()}
    # (-score, name, frontier concept, place in its list, candidate): unique from the third on
    heap: list[tuple[float, str, int, int, int]] = []
    for v, walk in walks.items():
        first = next(walk, None)
        if first is not None:
            heap.append((first[0], first[1], v, 0, first[2]))
    heapq.heapify(heap)
    found: list[tuple[int, int]] = []
    taken: set[int] = set()
    while heap and len(found) < budget:
        _, _name, v, index, c = heapq.heappop(heap)
        nxt = next(walks[v], None)
        if nxt is not None:
            heapq.heappush(heap, (nxt[0], nxt[1], v, index + 1, nxt[2]))
        if c in seen or c in taken:
            continue
        # Counts with every frontier concept: from the complete lists, else stored.
        stored = nb.counts(c, lazy) if lazy else {}
        counts: dict[int, int] = {}
        for u in frontier:
            edge = lists[u].edges.get(c)
            if edge is not None:
                counts[u] = edge[0]
            elif u in stored:
                counts[u] = stored[u]
        via = min(counts, key=lambda u: (-counts[u], names[u][0]))
        if via != v:
            continue  # it comes (with its own score) from its via's list
        found.append((c, v))
        taken.add(c)
    return found


def _by_score(
    sc: Scored, names: dict[int, tuple[str, int | None]]
) -> Iterator[tuple[float, str, int]]:
    """(-weightedScore, name, neighbour) of a list, by weightedScore desc, then name.

    The list's own rank (direct relations') puts the higher count first among equal scores; the
    expansion's does not, so each run of equal scores is sorted again by name (a stable sort:
    equal names keep their rank). ``names`` is the state's: ranking a stretch names it.
    """
    rank = 0
    n = sc.at(0)
    score = 0.0 if n is None else weighted_score(sc.edges[n])
    while n is not None:
        run = [n]
        rank += 1
        while (n := sc.at(rank)) is not None:
            next_score = weighted_score(sc.edges[n])
            if next_score != score:
                break
            run.append(n)
            rank += 1
        if len(run) > 1:
            run.sort(key=lambda m: names[m][0])
        for m in run:
            yield -score, names[m][0], m
        if n is not None:
            score = next_score


def community_siblings(
    nb: Neighbourhoods, qid: int, community_id: int, settings: Settings
) -> tuple[CommunitySibling, ...]:
    """Concepts of the query's community with no edge to it but enough shared neighbours.

    ``normalizedOverlap = Σ_{n∈shared} min(w(q,n), w(c,n)) / Σ_n w(c,n)``, w = co-occurrence
    count; the candidates are the query's neighbours' neighbours (indexed lookups per concept).
    """
    adjacent = nb.adjacency(qid)
    # Only members of the query's community that are not its neighbours can be siblings.
    members = sorted(nb.members(community_id) - adjacent.keys() - {qid})
    bound = settings.community_min_overlap
    if bound > 0 and nb.can_prune_siblings():
        # overlap(c) ≤ Σ_n w(q,n) = strength(q), so normalizedOverlap ≤ strength(q) /
        # strength(c): a member whose strength exceeds strength(q) / MIN_OVERLAP (with a margin
        # far above rounding) can never be kept, and its relations need not be read.
        limit = sum(adjacent.values()) * (1 + 1e-9)
        strength = nb.strengths(members)
        members = [c for c in members if strength[c] * bound <= limit]
    found = []
    stats = nb.overlaps(qid, adjacent, members, settings.community_min_shared, bound)
    info = nb.names(stats)
    for c, (shared, overlap, total) in stats.items():
        ratio = overlap / total if total else 0.0
        if ratio >= bound:
            found.append(CommunitySibling(info[c][0], community_id, shared, ratio))
    found.sort(key=lambda s: (-s.normalized_overlap, -s.shared_neighbor_count, s.name))
    return tuple(found[: settings.community_max_siblings])
