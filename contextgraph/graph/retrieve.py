"""Retrieval (SPEC §13): a question in, the files and notes it needs out, ranked, with reasons.

Two stages, fused into one score per file:

1. **Lexical.** §9 search over notes and code (any words, code-aware, bm25 × decay) gives the
   best ``retrieve_candidates`` matches; each has a lexical relevance ``L`` = its score over the
   best score (so the top match has 1).
2. **Graph.** The best ``retrieve_seeds`` matches are seeds, each as strong as its ``L``. A code
   seed reaches the files it imports and is imported by, and those its symbols reference, inherit
   or are referenced by (symbols stand for their files; a file's own ``defines`` edges never
   make separate items). A note seed reaches the notes that link the same concepts. Each edge
   passes on ``strength × edge weight × specificity``: an import or inheritance weighs
   ``retrieve_import_weight``, references alone ``retrieve_reference_weight``, a shared concept
   ``retrieve_concept_weight`` scaled by its rarity. *Specificity* down-weights hubs: a file
   imported by a large share of the source's files, or a concept linked by a large share of its
   notes, passes on ``1 − log(1 + d) / log(1 + N)`` (d: its in-degree or note count, N: files
   or notes of the source), so a logger everything imports reaches nobody in particular.
   Proximity ``G`` sums what a file receives from every seed, over the best ``G`` of the query.

``score = L + retrieve_graph_weight × G + retrieve_prior_weight × P``, where ``P`` is a file's
log size over the largest candidate's (big files are the ones most questions touch). A concept
linked by more than ``retrieve_concept_fanout`` notes is not followed at all. The weights are
settings; the defaults were chosen with ``scripts/bench_retrieval.py`` over the development case
sets (see the README's table).

The pack (:mod:`contextgraph.graph.retrieve_pack`): items carry ``why`` (matched words, graph paths)
and an excerpt; excerpts stop at ``budget_tokens``. Retrieval never writes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from contextgraph.errors import InvalidArgument, NotFound
from contextgraph.graph.decay import reference_time, weight
from contextgraph.graph.ftsquery import build_match, query_terms
from contextgraph.graph.retrieve_pack import Retrieval, RetrievedItem, Scored, pack
from contextgraph.graph.search import Candidate, ranked_matches
from contextgraph.graph.stopwords import STOPWORDS
from contextgraph.limits import MAX_QUERY_CHARS, RETRIEVE_BUDGET_TOKENS, RETRIEVE_K
from contextgraph.settings import Settings
from contextgraph.store.models import T_ENTITIES, T_FILES, T_MENTIONS, T_REL, T_SOURCES
from contextgraph.store.sqlcore import ByIds, ForIds, IdList, compiled_tuples

# Aliases built once: building one per call costs SQLAlchemy more than the query costs SQLite.
_SRC = T_ENTITIES.alias("src")
_DST = T_ENTITIES.alias("dst")

_GRAPH_TYPES = ("imports", "inherits", "references")


def retrieve(
    conn: Connection,
    query: str,
    *,
    settings: Settings,
    now: float,
    k: int = 10,
    budget_tokens: int = 6000,
    source: str | None = None,
) -> Retrieval:
    """Rank the files and notes ``query`` needs and pack their excerpts into ``budget_tokens``."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("give a question or some words to retrieve for")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are read"
        )
    RETRIEVE_K.check(k)
    RETRIEVE_BUDGET_TOKENS.check(budget_tokens)
    if source is not None and not _source_exists(conn, source):
        raise NotFound.source(source)
    terms = [t for t in query_terms(query) if t.phrase or t.text.lower() not in STOPWORDS]
    ranked = rank_files(conn, query, settings=settings, now=now, k=k, source=source)
    return pack(conn, query, terms, ranked, k, budget_tokens)


def rank_files(
    conn: Connection,
    query: str,
    *,
    settings: Settings,
    now: float,
    k: int,
    source: str | None = None,
) -> list[Scored]:
    """The ``k`` best files for ``query`` by fused lexical and graph score (no excerpts)."""
    terms = [t for t in query_terms(query) if t.phrase or t.text.lower() not in STOPWORDS]
    match = build_match(query)
    if not terms or match is None:
        return []  # only stopwords or punctuation: nothing to look for
    found, _ = ranked_matches(
        conn,
        match,
        settings=settings,
        now=now,
        top=settings.retrieve_candidates,
        source=source,
    )
    if not found:
        return []
    scored = _lexical(found)
    seeds = sorted(scored.values(), key=lambda s: -s.lexical)[: settings.retrieve_seeds]
    _code_neighbours(conn, seeds, scored, settings)
    _note_neighbours(conn, seeds, scored, settings, now)
    if source is not None:  # a concept links notes of every source: keep the one asked for
        scored = {i: s for i, s in scored.items() if s.source == source}
    best_graph = max((s.graph for s in scored.values()), default=0.0)
    prior = _size_prior(conn, list(scored)) if settings.retrieve_prior_weight else {}
    for s in scored.values():
        proximity = s.graph / best_graph if best_graph > 0 else 0.0
        s.score = (
            s.lexical
            + settings.retrieve_graph_weight * proximity
            + settings.retrieve_prior_weight * prior.get(s.file_id, 0.0)
        )
    return sorted(scored.values(), key=lambda s: (-s.score, s.path, s.source))[:k]


def _size_prior(conn: Connection, ids: list[int]) -> dict[int, float]:
    """log(size) over log(the largest candidate's size): big files change and matter more."""
    sizes = {int(i): int(n) for i, n in _SIZES.rows(conn, ids)}
    top = math.log1p(max(sizes.values(), default=1))
    return {i: math.log1p(n) / top for i, n in sizes.items()} if top > 0 else {}


def _source_exists(conn: Connection, name: str) -> bool:
    return bool(compiled_tuples(conn, "retrieve.source", _source_statement, {"name": name}))


def _lexical(found: list[Candidate]) -> dict[int, Scored]:
    top = found[0].score or 1.0
    return {
        c.file_id: Scored(c.file_id, c.source, c.path, c.kind, lexical=c.score / top) for c in found
    }


def _specificity(degree: int, population: int, damping: float) -> float:
    """1 for what nothing else points at, falling to 0 for what everything points at."""
    if population <= 1 or damping == 0:
        return 1.0
    return float(max(0.0, 1.0 - degree / population) ** damping)


def _code_neighbours(
    conn: Connection, seeds: list[Scored], scored: dict[int, Scored], settings: Settings
) -> None:
    """Spread each code seed's strength to the files it is related to, hubs damped."""
    strength = {s.file_id: s.lexical for s in seeds if s.kind == "code"}
    if not strength:
        return
    rows = list(_LINKS.rows(conn, list(strength)))
    # file pair (seed, other) -> the edge types between them, with their direction.
    links: dict[tuple[int, int], set[str]] = defaultdict(set)
    for a, b, rtype in rows:
        if a in strength:
            links[(a, b)].add("out:" + rtype)
        if b in strength:
            links[(b, a)].add("in:" + rtype)
    others = {other for _, other in links}
    if not others:
        return
    degree, population, info = _file_degrees(conn, others)
    for (seed, other), types in links.items():
        weight = (
            settings.retrieve_import_weight
            if types & {"out:imports", "in:imports", "out:inherits", "in:inherits"}
            else settings.retrieve_reference_weight
        )
        contribution = (
            strength[seed]
            * weight
            * _specificity(degree.get(other, 0), population, settings.retrieve_hub_damping)
        )
        if contribution <= 0 or other not in info:
            continue
        target = scored.get(other)
        if target is None:
            source_name, path, kind = info[other]
            target = scored[other] = Scored(other, source_name, path, kind)
        target.graph += contribution
        seed_path = scored[seed].path
        verb = _verb(types)
        target.reasons[f"{verb} {seed_path}"] = (
            target.reasons.get(f"{verb} {seed_path}", 0.0) + contribution
        )


def _verb(types: set[str]) -> str:
    """How a file is related to a seed, as the seed would say it of the file."""
    if "in:imports" in types:
        return "imports"
    if "out:imports" in types:
        return "imported by"
    if "in:inherits" in types:
        return "subclasses code in"
    if "out:inherits" in types:
        return "base class of code in"
    if "in:references" in types:
        return "uses"
    return "used by"


def _file_degrees(
    conn: Connection, file_ids: Iterable[int]
) -> tuple[dict[int, int], int, dict[int, tuple[str, str, str]]]:
    """How many files import each of ``file_ids``, the code files of their sources, and names."""
    ids = list(file_ids)
    info: dict[int, tuple[str, str, str]] = {}
    sources: set[int] = set()
    for fid, source_id, name, path, kind, *_times in _FILE_INFO.rows(conn, ids):
        info[int(fid)] = (name, path, kind)
        sources.add(int(source_id))
    # the sources are distinct, so the counts of their chunks add up
    population = sum(int(n) for (n,) in _CODE_FILES.rows(conn, sorted(sources)))
    degree = {int(fid): int(n) for fid, n in _IMPORTERS.rows(conn, ids)}
    return degree, population, info


def _note_neighbours(
    conn: Connection,
    seeds: list[Scored],
    scored: dict[int, Scored],
    settings: Settings,
    now: float,
) -> None:
    """Spread each note seed's strength to the notes linking the same concepts, by rarity and
    by each note's decay weight (SPEC §4): of two notes a concept reaches, the one written or
    read ten years ago gets its weight's share, as it would in search.

    A concept linked by more than ``retrieve_concept_fanout`` notes is a hub: it is not followed
    (its share of the notes would damp it to little anyway, and fanning out through it would
    read a large part of the vault for one question).
    """
    strength = {s.file_id: s.lexical for s in seeds if s.kind == "note"}
    if not strength:
        return
    linked = list(_LINKED.rows(conn, list(strength)))
    if not linked:
        return
    concepts = list({int(concept) for _, concept, _ in linked})
    df = {int(c): int(n) for c, n in _NOTE_COUNTS.rows(conn, concepts)}
    followed = {c for c, n in df.items() if 1 < n <= settings.retrieve_concept_fanout}
    if not followed:
        return
    population = int(compiled_tuples(conn, "retrieve.notes", _notes_statement, {})[0][0])
    notes_of: dict[int, list[int]] = defaultdict(list)
    for note, concept in _NOTES_OF.rows(conn, sorted(followed)):
        notes_of[int(concept)].append(int(note))
    info: dict[int, tuple[str, str, str]] = {}
    fresh: dict[int, float] = {}  # each note's decay weight
    reached = sorted({n for notes in notes_of.values() for n in notes})
    for fid, _source_id, name, path, kind, last, created, modified in _FILE_INFO.rows(
        conn, reached
    ):
        info[int(fid)] = (name, path, kind)
        fresh[int(fid)] = weight(reference_time(last, created, modified), now, settings)
    for seed_id, concept_id, concept_name in linked:
        seed, concept = int(seed_id), int(concept_id)
        if concept not in followed:
            continue
        contribution = (
            strength[seed]
            * settings.retrieve_concept_weight
            * _specificity(df[concept], population, settings.retrieve_hub_damping)
        )
        if contribution <= 0:
            continue
        reason = f"links [[{concept_name}]] like seed note {scored[seed].path}"
        for note in notes_of[concept]:
            if note == seed or note not in info:
                continue
            target = scored.get(note)
            if target is None:
                source_name, path, kind = info[note]
                target = scored[note] = Scored(note, source_name, path, kind)
            share = contribution * fresh.get(note, 1.0)
            target.graph += share
            target.reasons[reason] = target.reasons.get(reason, 0.0) + share


# The lookups over id lists (ForIds: built on first use, one text per statement on SQLite).
def _links_statement(ids: IdList) -> Any:
    """File pairs related by code edges, either end one of ``ids``, with the edge type."""
    src, dst, r = _SRC, _DST, T_REL
    base = (
        select(src.c.file_id.label("a"), dst.c.file_id.label("b"), r.c.type)
        .select_from(r.join(src, src.c.id == r.c.src_id).join(dst, dst.c.id == r.c.dst_id))
        .where(
            # one bound value per type: a statement compiled once has no expanding IN
            r.c.type.in_([bindparam(f"type{i}", t) for i, t in enumerate(_GRAPH_TYPES)]),
            src.c.file_id != dst.c.file_id,
        )
    )
    return base.where(src.c.file_id.in_(ids)).union(base.where(dst.c.file_id.in_(ids)))


def _importers_statement(ids: IdList) -> Any:
    """How many files import each file of ``ids``."""
    src, dst = _SRC, _DST
    return (
        select(dst.c.file_id, func.count(func.distinct(src.c.file_id)))
        .select_from(
            T_REL.join(src, src.c.id == T_REL.c.src_id).join(dst, dst.c.id == T_REL.c.dst_id)
        )
        .where(T_REL.c.type == "imports", dst.c.kind == "file", dst.c.file_id.in_(ids))
        .group_by(dst.c.file_id)
    )


def _notes_statement() -> Any:
    return select(func.count()).select_from(T_FILES).where(T_FILES.c.kind == "note")


def _source_statement() -> Any:
    return select(T_SOURCES.c.id).where(T_SOURCES.c.name == bindparam("name"))


_CODE_FILES = ByIds(  # how many code files the sources of ``ids`` hold
    select(func.count()).select_from(T_FILES).where(T_FILES.c.kind == "code"),
    T_FILES.c.source_id,
)
_LINKS = ForIds(_links_statement)
_IMPORTERS = ForIds(_importers_statement)
_SIZES = ByIds(select(T_FILES.c.id, T_FILES.c.size), T_FILES.c.id)
_FILE_INFO = ByIds(  # (id, source id, source name, path, kind, last read, created, modified)
    select(
        T_FILES.c.id,
        T_FILES.c.source_id,
        T_SOURCES.c.name,
        T_FILES.c.path,
        T_FILES.c.kind,
        T_FILES.c.last_accessed,  # the last three: what a file's decay weight comes from
        T_FILES.c.created,
        T_FILES.c.modified,
    ).join(T_SOURCES, T_SOURCES.c.id == T_FILES.c.source_id),
    T_FILES.c.id,
)
_LINKED = ByIds(  # (note, concept, concept name) of the notes of ``ids``
    select(T_MENTIONS.c.file_id, T_MENTIONS.c.concept_id, T_ENTITIES.c.name).join(
        T_ENTITIES, T_ENTITIES.c.id == T_MENTIONS.c.concept_id
    ),
    T_MENTIONS.c.file_id,
)
_NOTE_COUNTS = ForIds(  # (concept, how many notes link it)
    lambda ids: (
        select(T_MENTIONS.c.concept_id, func.count())
        .where(T_MENTIONS.c.concept_id.in_(ids))
        .group_by(T_MENTIONS.c.concept_id)
    )
)
_NOTES_OF = ByIds(  # (note, concept) of the concepts of ``ids``
    select(T_MENTIONS.c.file_id, T_MENTIONS.c.concept_id), T_MENTIONS.c.concept_id
)


__all__ = ["Retrieval", "RetrievedItem", "retrieve"]
