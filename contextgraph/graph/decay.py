"""Recency decay (SPEC §4): how much a note's age discounts the relations it supports.

A file's reference time is the later of its ``last_accessed`` (if it was ever read) and its base
time (frontmatter ``created``, else mtime); a read can only make a note fresher. ``age`` is whole
days from the reference time to *now*, floored; within the grace period the weight is 1.0.
"""

from __future__ import annotations

import math

from sqlalchemy import ColumnElement, Float, FromClause, case, cast, func, literal

from contextgraph.settings import Settings
from contextgraph.store.dialect import greatest, least

SECONDS_PER_DAY = 86400.0


def reference_time(last_accessed: float | None, created: float | None, modified: float) -> float:
    """Return the later of the last read and the base time (created, else modified)."""
    base = created if created is not None else modified
    return base if last_accessed is None else max(last_accessed, base)


def age_days(reference: float, now: float) -> int:
    """Whole days from ``reference`` to ``now`` (floor; negative for a future reference)."""
    return math.floor((now - reference) / SECONDS_PER_DAY)


def weight(reference: float, now: float, settings: Settings) -> float:
    """Decay weight in (0, 1] of a file whose reference time is ``reference``."""
    age = age_days(reference, now)
    grace = settings.grace_days
    if age <= grace:
        return 1.0
    if settings.decay_model == "exponential":
        return float(0.5 ** ((age - grace) / settings.half_life_days))
    return min(1.0, float((age - grace) ** -0.5))


def reference_sql(files: FromClause) -> ColumnElement[float]:
    """SQL for a files row's reference time (``files`` is the table or an alias of it).

    Migration 0005 keeps this per file in ``search_dates.reference`` (its triggers spell the
    same expression): a change here needs a migration there.
    """
    base = func.coalesce(files.c.created, files.c.modified)
    return greatest(func.coalesce(files.c.last_accessed, base), base)


def age_sql(
    reference: ColumnElement[float], now: float | ColumnElement[float]
) -> ColumnElement[float]:
    """SQL for :func:`age_days` of a reference-time expression (``now`` a value or a bound
    parameter)."""
    at = now if isinstance(now, ColumnElement) else literal(now, Float)
    return func.floor((at - reference) / SECONDS_PER_DAY)


def weight_sql(
    files: FromClause, now: float | ColumnElement[float], settings: Settings
) -> ColumnElement[float]:
    """SQL computing :func:`weight` for each row of ``files``; same numbers as the Python one."""
    return reference_weight_sql(reference_sql(files), now, settings)


def reference_weight_sql(
    reference: ColumnElement[float], now: float | ColumnElement[float], settings: Settings
) -> ColumnElement[float]:
    """SQL computing :func:`weight` of a reference-time expression (such as a stored
    :func:`reference_sql`)."""
    age = age_sql(reference, now)
    grace = literal(settings.grace_days, Float)
    decayed: ColumnElement[float]
    if settings.decay_model == "exponential":
        decayed = func.pow(0.5, (age - grace) / literal(settings.half_life_days, Float))
    else:
        decayed = least(1.0, func.pow(age - grace, -0.5))
    return cast(case((age <= grace, 1.0), else_=decayed), Float)
