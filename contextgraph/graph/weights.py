"""Precomputed per-relation decay-weight sums: BuildContext's neighbour lists, ready to read.

A concept's scored neighbourhood (every neighbour with its co-occurrence count and the sum of
the shared notes' decay weights, ranked as BuildContext ranks them) costs a mentions × mentions
join. Weights only change when a note's age crosses a whole day, so the sync that changes the
graph computes the lists of the concepts in at least ``weights_min_notes`` notes once, in one
``INSERT … SELECT`` (the same join and weight expression as the on-the-fly query, so the same
floating-point sums in the same note order), and a reader fetches one with an indexed range scan.

A list is used only when all of these hold, else the reader computes on the fly, exactly as
before (readers never write, so a read-only database keeps working):
- ``meta['relation_weights']`` names the current graph version and the reader's decay settings;
- *now* lies in the concept's window: no note of the concept changes its weight between the
  instant of the precompute and *now* (one second of margin on each side of every day boundary,
  far more than the rounding of the age formula).
"""

from __future__ import annotations

import json
import math
from datetime import datetime

from sqlalchemy import (
    Connection,
    Engine,
    Float,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    select,
)

from contextgraph.graph.decay import SECONDS_PER_DAY, age_sql, reference_sql, weight_sql
from contextgraph.settings import Settings
from contextgraph.store import db, meta
from contextgraph.store.dialect import qmark
from contextgraph.store.models import (
    T_CREL,
    T_ENTITIES,
    T_FILES,
    T_MENTIONS,
    T_RW,
    T_STRENGTHS,
    T_WINDOWS,
)
from contextgraph.store.sqlcore import ByIds

STATE_KEY = "relation_weights"
REFRESHED_KEY = "relation_weights_at"  # epoch seconds of the instant the lists were computed for
# The weights_min_notes they were computed with. Not part of STATE_KEY: a reader with another
# threshold still reads exact lists (a concept without one is computed on the fly); only a
# writer compares it, so that changing the threshold recomputes them on the next sync.
MIN_NOTES_KEY = "relation_weights_min_notes"
MARGIN_SECONDS = 1.0
_NEVER = -1e300  # a valid_from that every instant passes (ages within grace weigh 1.0)


def state_for(version: str, settings: Settings) -> str:
    """The ``meta`` value that makes a precompute valid for ``version`` under ``settings``."""
    return json.dumps(
        {
            "version": version,
            "decay_model": settings.decay_model,
            "grace_days": settings.grace_days,
            "half_life_days": settings.half_life_days,
        },
        sort_keys=True,
    )


def stored_state(conn: Connection) -> str | None:
    return meta.get(conn, STATE_KEY)


def refresh(engine: Engine, settings: Settings, now: datetime | float | None = None) -> int:
    """Recompute every list for the current graph version; return the number of rows written.

    Runs in one write transaction, so readers see the old lists (or none) until it commits,
    and a concurrent graph change (which bumps the version) simply makes them stale. With the
    precompute off (``weights_min_notes`` 0) it removes the lists and their state: a state
    valid over empty tables would tell readers every concept's strength is 0, and community
    siblings, divided by it, would vanish.
    """
    if now is None:
        now = settings.current_time()
    at = now.timestamp() if isinstance(now, datetime) else float(now)
    with db.write(engine, retry_seconds=settings.lock_retry_seconds) as conn:
        conn.execute(delete(T_RW))
        conn.execute(delete(T_WINDOWS))
        conn.execute(delete(T_STRENGTHS))
        if settings.weights_min_notes <= 0:
            for key in (STATE_KEY, REFRESHED_KEY, MIN_NOTES_KEY):
                meta.remove(conn, key)
            return 0
        _fill(conn, settings, at)
        _fill_strengths(conn)
        written = int(conn.execute(select(func.count()).select_from(T_RW)).scalar_one())
        meta.put(conn, STATE_KEY, state_for(meta.graph_version(conn), settings))
        meta.put(conn, REFRESHED_KEY, repr(at))
        meta.put(conn, MIN_NOTES_KEY, str(settings.weights_min_notes))
    return written


def due(engine: Engine, settings: Settings, now: float) -> bool:
    """Whether a long-running process should :func:`refresh` now.

    True when the precompute is on and the stored lists are stale (the graph, a decay setting
    or the threshold changed since), or were computed on an earlier UTC day than ``now``: past
    a day boundary the windows of the notes' ages have moved on, and readers fall back to the
    on-the-fly query.
    """
    if settings.weights_min_notes <= 0:
        return False
    with db.read(engine, retry_seconds=settings.lock_retry_seconds) as conn:
        if not _current(conn, settings):
            return True
        at = meta.get(conn, REFRESHED_KEY)
    return at is None or math.floor(float(at) / SECONDS_PER_DAY) != math.floor(
        now / SECONDS_PER_DAY
    )


def refresh_when_due(
    engine: Engine, settings: Settings, now: datetime | float | None = None
) -> bool:
    """:func:`refresh` if :func:`due`; True when it refreshed. For writers only (MCP, watch)."""
    if now is None:
        now = settings.current_time()
    at = now.timestamp() if isinstance(now, datetime) else float(now)
    if not due(engine, settings, at):
        return False
    refresh(engine, settings, at)
    return True


def is_current(engine: Engine, settings: Settings) -> bool:
    """True when the stored lists were computed for the current graph version and settings,
    the threshold ``weights_min_notes`` included (a writer's question: readers use any exact
    list, :meth:`~contextgraph.graph.neighbourhood.Neighbourhoods.ranked`)."""
    with db.read(engine) as conn:
        return _current(conn, settings)


def _current(conn: Connection, settings: Settings) -> bool:
    return stored_state(conn) == state_for(meta.graph_version(conn), settings) and meta.get(
        conn, MIN_NOTES_KEY
    ) == str(settings.weights_min_notes)


def _fill(conn: Connection, settings: Settings, at: float) -> None:
    f = T_FILES.alias("f")
    ref = reference_sql(f)
    age = age_sql(ref, at)
    grace = settings.grace_days
    day = literal(SECONDS_PER_DAY, Float)
    margin = literal(MARGIN_SECONDS, Float)
    # Per note: its weight now, and the instants between which that weight holds.
    fw = (
        select(
            f.c.id.label("id"),
            weight_sql(f, at, settings).label("w"),
            case((age <= grace, literal(_NEVER, Float)), else_=ref + age * day + margin).label(
                "vf"
            ),
            case(
                (age <= grace, ref + (math.floor(grace) + 1) * day - margin),
                else_=ref + (age + 1) * day - margin,
            ).label("vu"),
        )
        .where(f.c.pairs == 1)
        .cte("fw")
        .prefix_with("MATERIALIZED")
    )
    hubs = (
        select(T_MENTIONS.c.concept_id)
        .group_by(T_MENTIONS.c.concept_id)
        .having(func.count() >= settings.weights_min_notes)
        .scalar_subquery()
    )
    # The on-the-fly query's join, note order and total(): the same sums, bit for bit.
    m1, m2 = T_MENTIONS.alias("m1"), T_MENTIONS.alias("m2")
    agg = (
        select(
            m1.c.concept_id.label("c"),
            m2.c.concept_id.label("o"),
            func.count().label("co"),
            func.total(fw.c.w).label("tot"),
        )
        .select_from(
            m1.join(fw, fw.c.id == m1.c.file_id).join(
                m2, and_(m2.c.file_id == m1.c.file_id, m2.c.concept_id != m1.c.concept_id)
            )
        )
        .where(m1.c.concept_id.in_(hubs))
        .group_by(m1.c.concept_id, m2.c.concept_id)
        .subquery("agg")
    )
    e = T_ENTITIES.alias("e")
    score = agg.c.co * (agg.c.tot / agg.c.co)  # weightedScore as neighbourhood computes it
    rank = func.row_number().over(
        partition_by=agg.c.c, order_by=(score.desc(), agg.c.co.desc(), e.c.name, agg.c.o)
    )
    rows = select(
        agg.c.c, rank - 1, agg.c.o, agg.c.co, agg.c.tot, e.c.name, e.c.community_id
    ).select_from(agg.join(e, e.c.id == agg.c.o))
    conn.execute(
        insert(T_RW).from_select(
            ["concept_id", "rank", "other_id", "count", "total", "name", "community_id"], rows
        )
    )
    windows = (
        select(T_MENTIONS.c.concept_id, func.max(fw.c.vf), func.min(fw.c.vu))
        .select_from(T_MENTIONS.join(fw, fw.c.id == T_MENTIONS.c.file_id))
        .where(T_MENTIONS.c.concept_id.in_(select(T_RW.c.concept_id).distinct()))
        .group_by(T_MENTIONS.c.concept_id)
    )
    conn.execute(
        insert(T_WINDOWS).from_select(["concept_id", "valid_from", "valid_until"], windows)
    )


def _fill_strengths(conn: Connection) -> None:
    """Every concept's weighted degree: community siblings prune and divide by it."""
    sides = select(T_CREL.c.a_id.label("c"), T_CREL.c.count.label("w")).union_all(
        select(T_CREL.c.b_id, T_CREL.c.count)
    )
    both = sides.subquery("both")
    conn.execute(
        insert(T_STRENGTHS).from_select(
            ["concept_id", "strength"],
            select(both.c.c, func.sum(both.c.w)).group_by(both.c.c),
        )
    )


def strengths(conn: Connection, ids: list[int]) -> dict[int, int]:
    """Precomputed weighted degrees (a concept without relations has none: 0)."""
    out = dict.fromkeys(ids, 0)
    out.update((int(c), int(w)) for c, w in _STORED_STRENGTHS.rows(conn, ids))
    return out


_STORED_STRENGTHS = ByIds(
    select(T_STRENGTHS.c.concept_id, T_STRENGTHS.c.strength), T_STRENGTHS.c.concept_id
)


def load(
    conn: Connection, cid: int, now: float, limit: int | None = None
) -> tuple[list[tuple[int, int, float, str, int | None]], float] | None:
    """``cid``'s precomputed list (rank order) and the end of its window, if valid at ``now``.

    With ``limit``, only the first ``limit`` ranks (read the rest with :func:`ranks`, in the
    same read transaction). The caller has checked the stored state against the graph version
    and settings."""
    window = conn.exec_driver_sql(qmark(conn, _WINDOW_SQL), (cid,)).first()
    if window is None or not (window[0] <= now < window[1]):
        return None
    if limit is None:
        rows = conn.exec_driver_sql(qmark(conn, _LOAD_SQL), (cid,)).fetchall()
    else:
        rows = conn.exec_driver_sql(qmark(conn, _RANKS_SQL), (cid, 0, limit)).fetchall()
    return [(o, co, tot, name, community) for o, co, tot, name, community in rows], float(window[1])


def ranks(
    conn: Connection, cid: int, start: int, stop: int
) -> list[tuple[int, int, float, str, int | None]]:
    """Ranks ``start`` to ``stop - 1`` of ``cid``'s precomputed list (see :func:`load`)."""
    rows = conn.exec_driver_sql(qmark(conn, _RANKS_SQL), (cid, start, stop)).fetchall()
    return [(o, co, tot, name, community) for o, co, tot, name, community in rows]


_WINDOW_SQL = "SELECT valid_from, valid_until FROM relation_weight_windows WHERE concept_id = ?"


_LOAD_SQL = (
    "SELECT other_id, count, total, name, community_id FROM relation_weights"
    " WHERE concept_id = ? ORDER BY rank"
)
_RANKS_SQL = (
    "SELECT other_id, count, total, name, community_id FROM relation_weights"
    " WHERE concept_id = ? AND rank >= ? AND rank < ? ORDER BY rank"
)


__all__ = [
    "due",
    "is_current",
    "load",
    "ranks",
    "refresh",
    "refresh_when_due",
    "state_for",
    "stored_state",
]
