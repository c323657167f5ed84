"""The SQL over stored relations that BuildContext's neighbourhoods run (graph layer).

Each is built on first use (:class:`~contextgraph.store.sqlcore.ForIds` per id-list size, or a
builder for :func:`~contextgraph.store.sqlcore.compiled_tuples`), so importing this costs
nothing. :mod:`contextgraph.graph.neighbourhood` decides which to run and caches the answers.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    CompoundSelect,
    Connection,
    Float,
    FromClause,
    Join,
    Select,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    or_,
    select,
    union_all,
)
from sqlalchemy.sql.elements import BindParameter

from contextgraph.graph.decay import SECONDS_PER_DAY, age_sql, reference_sql, weight_sql
from contextgraph.settings import Settings
from contextgraph.store.dialect import least
from contextgraph.store.dialect import total as float_total
from contextgraph.store.models import T_CREL, T_ENTITIES, T_FILES, T_MENTIONS
from contextgraph.store.sqlcore import ByIds, ForIds, ForList, IdList

# A concept's relations from either end: (concept, neighbour, count).
RELATIONS_OF = (
    ByIds(select(T_CREL.c.a_id, T_CREL.c.b_id, T_CREL.c.count), T_CREL.c.a_id),
    ByIds(select(T_CREL.c.b_id, T_CREL.c.a_id, T_CREL.c.count), T_CREL.c.b_id),
)
# The counts of concept :c with some others, from either end: (other, count).
COUNTS = ForIds(
    lambda ids: union_all(
        select(T_CREL.c.b_id, T_CREL.c.count).where(
            T_CREL.c.a_id == bindparam("c"), T_CREL.c.b_id.in_(ids)
        ),
        select(T_CREL.c.a_id, T_CREL.c.count).where(
            T_CREL.c.b_id == bindparam("c"), T_CREL.c.a_id.in_(ids)
        ),
    )
)


def _strengths_statement(ids: IdList) -> Select[Any]:
    # count(c, b) is the number of pair-counting notes (``pairs`` 1) that mention both, so
    # Σ_b count(c, b) = Σ over those notes n mentioning c of (concept_count(n) − 1): one
    # mention per note read, instead of one relation per neighbour (a hub has many more).
    m, f = T_MENTIONS, T_FILES
    counted = and_(f.c.id == m.c.file_id, f.c.pairs == 1)
    return (
        select(m.c.concept_id, func.sum(f.c.concept_count - 1))
        .select_from(m.join(f, counted))
        .where(m.c.concept_id.in_(ids))
        .group_by(m.c.concept_id)
    )


# Weighted degrees: (concept, sum of its relations' counts), from its notes (see above).
STRENGTHS = ForIds(_strengths_statement)


def _relations_of(concept: str) -> CompoundSelect[Any]:
    """The relations of concept ``:<concept>`` from either end: (n = neighbour, w = count)."""
    cid: BindParameter[int] = bindparam(concept)
    return union_all(
        select(T_CREL.c.b_id.label("n"), T_CREL.c.count.label("w")).where(T_CREL.c.a_id == cid),
        select(T_CREL.c.a_id, T_CREL.c.count).where(T_CREL.c.b_id == cid),
    )


def _neighbours_of_q() -> CTE:
    """Concept ``:q``'s relations, materialized once: (neighbour, count); a neighbour once."""
    return _relations_of("q").cte("qn").prefix_with("MATERIALIZED")


def _overlaps_statement(ids: IdList) -> CompoundSelect[Any]:
    """(candidate, shared neighbours with ``:q``, Σ min of the two counts, Σ of its counts) for
    the candidates ``ids``, one row per candidate and end of the key (the caller adds the two):
    each relation (c, n) of a candidate is matched with ``:q``'s relation to n in ``:q``'s
    relations, materialized once (a lookup in a few hundred rows, not in the whole table).

    Each end is grouped by itself: its rows come from its own index in key order, so SQLite
    groups them as they come, where grouping the union sorted every row first (the corpora's
    matches 7.9 → 5.2 ms each)."""
    r = T_CREL.alias("r")
    qn = _neighbours_of_q()

    def end(here: ColumnElement[int], there: ColumnElement[int]) -> Select[Any]:
        return (
            select(
                here,
                func.count(qn.c.n),
                # An unmatched relation adds 0 (PostgreSQL's LEAST would skip the NULL instead).
                func.coalesce(func.sum(least(r.c.count, func.coalesce(qn.c.w, 0))), 0),
                func.sum(r.c.count),
            )
            .select_from(r.outerjoin(qn, qn.c.n == there))
            .where(here.in_(ids))
            .group_by(here)
        )

    return union_all(end(r.c.a_id, r.c.b_id), end(r.c.b_id, r.c.a_id))


OVERLAPS = ForIds(_overlaps_statement)


def members_statement() -> Select[Any]:
    concept = T_ENTITIES.c
    return select(concept.id).where(
        concept.community_id == bindparam("cm"), concept.kind == "concept"
    )


def _walk_statement(ids: IdList) -> Select[Any]:
    """The candidates ``ids`` sharing at least ``:k`` neighbours with concept ``:q``: (candidate,
    shared neighbours, Σ min of the two counts, Σ of the candidate's counts with them), by
    walking the relations of ``:q``'s neighbours. Each relation's far end is looked up in the
    candidates (an index SQLite builds once over the list), not in ``entities`` by its
    community: the walk costs half, and only candidates' rows are grouped. The ``+ 0`` keeps
    SQLite from driving the join by the list instead (one key lookup per neighbour and
    candidate: hundreds of times the rows)."""
    qn = _neighbours_of_q()
    r = T_CREL.alias("r")

    def walk(here: ColumnElement[int], there: ColumnElement[int]) -> Select[Any]:
        return (
            select(there.label("c"), least(qn.c.w, r.c.count).label("m"), r.c.count.label("w"))
            .select_from(qn.join(r, here == qn.c.n))
            .where((there + literal_column("0")).in_(ids))
        )

    rows = union_all(walk(r.c.a_id, r.c.b_id), walk(r.c.b_id, r.c.a_id)).subquery("rows")
    shared = func.count()
    return (
        select(rows.c.c, shared, func.sum(rows.c.m), func.sum(rows.c.w))
        .group_by(rows.c.c)
        .having(shared >= bindparam("k"))
    )


# The siblings' walk, over the whole candidate list at once (see ForList).
WALK = ForList(_walk_statement)


def _relation_rows_statement(ids: IdList) -> Select[Any]:
    """The relations of the concepts ``ids``, one per end, up to ``:cap``: each end read from
    its own index (index entries only), stopping at the cap."""
    a, b = T_CREL.c.a_id, T_CREL.c.b_id
    rows = (
        union_all(select(a).where(a.in_(ids)), select(b).where(b.in_(ids)))
        .limit(bindparam("cap"))
        .subquery("rows")
    )
    return select(func.count()).select_from(rows)


def _relation_count_statement(ids: IdList) -> Select[Any]:
    """The relations of the concepts ``ids``, one per end, all of them: two plain counts of
    index entries, each half as dear an entry as a capped count (a row handed through a LIMIT:
    100 against 50 ns), which pays when no cap near the total would stop it early."""
    a, b = T_CREL.c.a_id, T_CREL.c.b_id

    def ends(end: ColumnElement[int]) -> Any:
        return select(func.count()).select_from(T_CREL).where(end.in_(ids)).scalar_subquery()

    return select(ends(a) + ends(b))


RELATION_ROWS = ForIds(_relation_rows_statement)
RELATION_COUNT = ForIds(_relation_count_statement)


_NAMES = ByIds(
    select(T_ENTITIES.c.id, T_ENTITIES.c.name, T_ENTITIES.c.community_id), T_ENTITIES.c.id
)


def entity_names(conn: Connection, ids: list[int]) -> dict[int, tuple[str, int | None]]:
    """id -> (name, community id) of the given entities."""
    return {int(eid): (name, community) for eid, name, community in _NAMES.rows(conn, ids)}


def _reaches_past_statement(ids: IdList) -> Select[Any]:
    """Whether concept ``:cid`` has a relation to a concept not in ``ids``: each end read from
    its own index, up to the first such relation."""
    cid: BindParameter[int] = bindparam("cid")
    a, b = T_CREL.c.a_id, T_CREL.c.b_id
    return select(
        or_(
            select(b).where(a == cid, b.not_in(ids)).exists(),
            select(a).where(b == cid, a.not_in(ids)).exists(),
        )
    )


# A hop's frontier concept whose neighbours are all seen adds nothing to the hop. In a real
# vault that is most of them (a concept met only in notes of the query's: logseq-docs, 704 of
# 973 frontier lists of 200 first BuildContexts), and telling costs a few index entries, not
# the mentions × mentions join of its list.
REACHES_PAST = ForList(_reaches_past_statement)


def scored_statement(
    settings: Settings, *, prefix: bool = False, excluding: IdList | None = None
) -> Select[Any]:
    """Every neighbour of concept ``:cid`` with its count and weight sum at ``:now``, and the
    concept's next tick.

    Each of the concept's notes (within the concept limit) is weighed once, in note order; then
    one row per note and co-occurring concept, summed in that order. Everything but ``cid`` and
    ``now`` comes from the decay settings, so
    :func:`~contextgraph.store.sqlcore.compiled_tuples` compiles it once per decay settings
    (thousands of result rows through Core cost more than the join). A note's tick is the
    instant its age reaches its next whole day past the grace period (a note within it: the
    first whole day past it, as no age within it changes its weight); every row carries the
    first tick of all the concept's notes, computed once: no weight of the list changes
    before it. (A tick per row, the first of the notes it sums,
    would postpone that only for a note that shares no neighbour, and aggregating it cost a
    hub's list of 1,336 neighbours a seventh of its time: 4.25 against 3.67 ms.)

    The rows come in :func:`~contextgraph.graph.neighbourhood.rank_key` order, ties by id: the
    score is the same float operations as
    :func:`~contextgraph.graph.neighbourhood.weighted_score` (``count × (total / count)``, IEEE
    doubles on both engines), and SQLite's sorter ranks a hub's thousands of neighbours for
    less than Python does (bench's vault, first BuildContext: p50 175 → 135 ms).

    With ``prefix``, only the first ``:rows`` rows. With
    ``excluding`` (an id list, :class:`~contextgraph.store.sqlcore.ForList`), those
    neighbours are left out before the grouping: :func:`unseen_statement`.
    """
    now: BindParameter[float] = bindparam("now", type_=Float)
    cid: BindParameter[int] = bindparam("cid")
    m1, m2, f = T_MENTIONS.alias("m1"), T_MENTIONS.alias("m2"), T_FILES.alias("f")
    reference = reference_sql(f)
    age = age_sql(reference, now)
    # Within the grace period the weight stays 1.0 up to the first whole day past it.
    first_decayed = math.floor(settings.grace_days) + 1
    tick = case(
        (age + 1 > settings.grace_days, reference + (age + 1) * SECONDS_PER_DAY),
        else_=reference + first_decayed * SECONDS_PER_DAY,
    )
    notes = (
        select(
            f.c.id.label("id"),
            weight_sql(f, now, settings).label("w"),
            tick.label("tick"),
        )
        .select_from(m1.join(f, and_(f.c.id == m1.c.file_id, f.c.pairs == 1)))
        .where(m1.c.concept_id == cid)
        .cte("notes")
        .prefix_with("MATERIALIZED")
    )
    count, weights = func.count(), float_total(notes.c.w, order_by=notes.c.id)
    score = count * (weights / cast(count, Float))
    first_tick = select(func.min(notes.c.tick)).scalar_subquery()
    columns: list[Any] = [m2.c.concept_id, count, weights, first_tick]
    joined = and_(m2.c.file_id == notes.c.id, m2.c.concept_id != cid)
    if excluding is not None:
        joined = and_(joined, m2.c.concept_id.not_in(excluding))
    query = (
        select(*columns)
        .select_from(notes.join(m2, joined))
        .group_by(m2.c.concept_id)
        .order_by(score.desc(), count.desc(), m2.c.concept_id)
    )
    return query.limit(bindparam("rows")) if prefix else query


def cooccurrences() -> tuple[Join, FromClause, FromClause, FromClause]:
    """(join, m1, m2, f): each row is one note ``f`` in which ``m1`` and ``m2`` co-occur.

    Notes over the concept limit add no pairs, so they are left out.
    """
    m1, m2, f = T_MENTIONS.alias("m1"), T_MENTIONS.alias("m2"), T_FILES.alias("f")
    joined = m1.join(f, and_(f.c.id == m1.c.file_id, f.c.pairs == 1)).join(
        m2, and_(m2.c.file_id == m1.c.file_id, m2.c.concept_id != m1.c.concept_id)
    )
    return joined, m1, m2, f


@cache
def unseen_statement(settings: Settings, prefix: bool) -> ForList:
    """:func:`scored_statement` of a concept's neighbours but a list of them (those a
    BuildContext hop has seen), built on first use per settings."""
    return ForList(lambda ids: scored_statement(settings, prefix=prefix, excluding=ids))


def adjacency_statement() -> CompoundSelect[Any]:
    """The relations of concept ``:c`` from either end: (neighbour, count)."""
    return _relations_of("c")


__all__ = [
    "COUNTS",
    "OVERLAPS",
    "REACHES_PAST",
    "RELATIONS_OF",
    "RELATION_COUNT",
    "RELATION_ROWS",
    "STRENGTHS",
    "WALK",
    "adjacency_statement",
    "cooccurrences",
    "entity_names",
    "members_statement",
    "scored_statement",
    "unseen_statement",
]
