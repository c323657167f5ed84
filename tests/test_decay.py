from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Float, column, select, table

from contextgraph.graph.decay import age_days, reference_time, weight, weight_sql
from contextgraph.settings import Settings
from contextgraph.store import db

DAY = 86400.0
NOW = 1_800_000_000.0


def test_weight_is_one_within_the_grace_period() -> None:
    s = Settings()
    assert weight(NOW - 28 * DAY, NOW, s) == 1.0
    assert weight(NOW, NOW, s) == 1.0


def test_power_law_decays_with_inverse_square_root_past_the_grace() -> None:
    s = Settings()
    assert weight(NOW - 29 * DAY, NOW, s) == 1.0  # (29 - 28) ** -0.5
    assert weight(NOW - 32 * DAY, NOW, s) == pytest.approx(0.5)  # (32 - 28) ** -0.5
    assert weight(NOW - 128 * DAY, NOW, s) == pytest.approx(0.1)


def test_age_is_whole_days_floored() -> None:
    assert age_days(NOW - 32 * DAY + 1, NOW) == 31
    assert weight(NOW - 32 * DAY + 1, NOW, Settings()) == pytest.approx(3**-0.5)


def test_exponential_model_halves_every_half_life() -> None:
    s = Settings(decay_model="exponential")
    assert weight(NOW - (28 + 30) * DAY, NOW, s) == pytest.approx(0.5)
    assert weight(NOW - (28 + 60) * DAY, NOW, s) == pytest.approx(0.25)


def test_reference_time_is_the_later_of_read_and_base() -> None:
    assert reference_time(None, 100.0, 50.0) == 100.0
    assert reference_time(None, None, 50.0) == 50.0
    assert reference_time(200.0, 100.0, 50.0) == 200.0
    # a read can only make a note fresher, never older
    assert reference_time(10.0, 100.0, 50.0) == 100.0


def test_future_reference_times_weigh_one() -> None:
    assert weight(NOW + 400 * DAY, NOW, Settings()) == 1.0


@given(
    ages=st.lists(st.floats(min_value=-10 * DAY, max_value=5000 * DAY), min_size=1, max_size=20),
    model=st.sampled_from(["power-law", "exponential"]),
)
def test_sql_weight_matches_python_weight(ages: list[float], model: str) -> None:
    settings = Settings(decay_model=model)
    engine = db.make_engine(":memory:")
    files = table(
        "f",
        column("created", Float),
        column("modified", Float),
        column("last_accessed", Float),
    )
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE f (created REAL, modified REAL, last_accessed REAL)")
        for age in ages:
            conn.exec_driver_sql(
                "INSERT INTO f VALUES (?, ?, NULL)", (NOW - age, NOW - age - 5 * DAY)
            )
        got = [r[0] for r in conn.execute(select(weight_sql(files, NOW, settings)))]
    expected = [weight(NOW - age, NOW, settings) for age in ages]
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got, expected, strict=True))
