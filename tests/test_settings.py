"""Settings: environment parsing, validation, replace and the injectable clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contextgraph.errors import InvalidArgument
from contextgraph.settings import Settings, parse_datetime


def test_environment_values_are_parsed_by_field_type() -> None:
    s = Settings.from_env(
        {
            "CONTEXTGRAPH_MAX_ENTITIES": "7",
            "CONTEXTGRAPH_GRACE_DAYS": "3.5",
            "CONTEXTGRAPH_DECAY_MODEL": "exponential",
            "CONTEXTGRAPH_EXPAND_STOPWORDS": " The, a ,,",
            "CONTEXTGRAPH_NOW": "2026-01-02",
            "CONTEXTGRAPH_DEPTH": "  ",  # blank means unset
        }
    )
    assert (s.max_entities, s.grace_days, s.decay_model) == (7, 3.5, "exponential")
    assert s.expand_stopwords == ("the", "a")
    assert s.now == datetime(2026, 1, 2, tzinfo=UTC)
    assert s.depth == Settings().depth


def test_overrides_win_over_the_environment_and_none_is_ignored() -> None:
    s = Settings.from_env({"CONTEXTGRAPH_MAX_ENTITIES": "7"}, max_entities=9, depth=None)
    assert s.max_entities == 9 and s.depth == Settings().depth


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONTEXTGRAPH_MAX_ENTITIES": "many"}, "CONTEXTGRAPH_MAX_ENTITIES: cannot parse 'many'"),
        ({"CONTEXTGRAPH_DECAY_MODEL": "linear"}, "decay_model must be one of"),
        ({"CONTEXTGRAPH_BATCH_FILES": "0"}, r"BATCH_FILES \(batch_files\) must be between 1 and"),
        ({"CONTEXTGRAPH_HALF_LIFE_DAYS": "0"}, r"\(half_life_days\) must be > 0"),
        ({"CONTEXTGRAPH_COMMUNITY_ALGORITHM": "x"}, "community_algorithm must be one of"),
        ({"CONTEXTGRAPH_GRACE_DAYS": "nan"}, r"\(grace_days\) must be a finite number, not nan"),
        ({"CONTEXTGRAPH_HALF_LIFE_DAYS": "inf"}, r"\(half_life_days\) must be a finite number"),
        ({"CONTEXTGRAPH_RETRIEVE_GRAPH_WEIGHT": "nan"}, r"\(retrieve_graph_weight\) must be a fin"),
        ({"CONTEXTGRAPH_COMMUNITY_RESOLUTION": "-inf"}, r"\(community_resolution\) must be a fin"),
        ({"CONTEXTGRAPH_NOW": "9999-12-31T23:59:59-12:00"}, "CONTEXTGRAPH_NOW: .* out of range"),
    ],
)
def test_unusable_values_are_one_line_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Settings.from_env(env)


def test_replace_validates_and_keeps_unchanged_settings() -> None:
    s = Settings()
    assert s.replace(depth=None) is s
    assert s.replace(depth=3).depth == 3
    with pytest.raises(InvalidArgument):
        s.replace(community_resolution=0.0)


def test_the_clock_is_injectable_and_always_utc() -> None:
    fixed = parse_datetime("2026-11-30T13:00:00+01:00")
    assert fixed == datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert Settings(now=fixed).current_time() == fixed
    assert Settings().current_time().tzinfo is UTC
    assert parse_datetime("2026-11-30T12:00:00Z") == fixed
    with pytest.raises(InvalidArgument, match="not an ISO 8601"):
        parse_datetime("yesterday")


def test_as_dict_is_json_ready() -> None:
    d = Settings(now=parse_datetime("2026-01-01"), expand_stopwords=("a",)).as_dict()
    assert d["now"] == "2026-01-01T00:00:00+00:00" and d["expand_stopwords"] == ["a"]


@pytest.mark.parametrize("raw", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"])
def test_a_datetime_past_the_calendar_in_utc_is_a_clear_error(raw: str) -> None:
    with pytest.raises(InvalidArgument, match="out of range in UTC"):
        parse_datetime(raw)
