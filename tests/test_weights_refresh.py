"""Long-running processes refresh the precomputed relation weights when the day turns."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import NOW, Writer
from mcp import Client

from contextgraph import ContextGraph, background, mcp_server
from contextgraph.graph import weights
from contextgraph.settings import Settings, parse_datetime
from contextgraph.store import db, meta
from contextgraph.watch import WEIGHTS_CHECK_SECONDS, Watcher

DAY = 86400.0


@pytest.fixture
def graph(db_path: Path, write: Writer, vault: Path) -> Iterator[ContextGraph]:
    for n in range(12):
        write(f"n{n:02d}.md", f"[[Alpha]] [[Beta {n % 3}]] [[Gamma]]", created="2026-01-05")
    settings = Settings.from_env(now=parse_datetime(NOW), weights_min_notes=1)
    g = ContextGraph.open(db_path, settings=settings)
    g.sync([vault])
    yield g
    g.close()


def _refreshed_at(graph: ContextGraph) -> float | None:
    with db.read(graph.engine) as conn:
        at = meta.get(conn, weights.REFRESHED_KEY)
    return None if at is None else float(at)


def test_the_lists_are_due_again_only_when_the_day_turns(graph: ContextGraph) -> None:
    synced = _refreshed_at(graph)
    assert synced == parse_datetime(NOW).timestamp()  # the sync computed them for its instant
    day_end = (synced // DAY + 1) * DAY
    assert not weights.refresh_when_due(graph.engine, graph.settings, day_end - 1)
    assert weights.refresh_when_due(graph.engine, graph.settings, day_end + 1)
    assert _refreshed_at(graph) == day_end + 1
    assert not weights.refresh_when_due(graph.engine, graph.settings, day_end + 2)


def test_a_graph_change_makes_them_due_and_off_never_is(graph: ContextGraph) -> None:
    at = _refreshed_at(graph)
    assert at is not None
    with db.write(graph.engine) as conn:
        meta.bump_version(conn)  # as a read of a note does
    assert weights.due(graph.engine, graph.settings, at)
    off = graph.settings.replace(weights_min_notes=0)
    assert not weights.due(graph.engine, off, at + 10 * DAY)
    assert weights.refresh_when_due(graph.engine, graph.settings, at)
    assert weights.is_current(graph.engine, graph.settings)


def test_a_watcher_refreshes_when_due_at_most_once_a_minute(
    graph: ContextGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []
    original = weights.refresh

    def spy(engine: object, settings: Settings, now: float | None = None) -> int:
        calls.append(float(now or 0))
        return original(engine, settings, now)  # type: ignore[arg-type]

    monkeypatch.setattr(weights, "refresh", spy)
    with db.write(graph.engine) as conn:  # computed a day earlier: due
        meta.put(conn, weights.REFRESHED_KEY, repr(parse_datetime(NOW).timestamp() - DAY))
    watcher = Watcher(graph)
    watcher.refresh_weights(1000.0)
    assert len(calls) == 1
    with db.write(graph.engine) as conn:
        meta.put(conn, weights.REFRESHED_KEY, repr(parse_datetime(NOW).timestamp() - DAY))
    watcher.refresh_weights(1000.0 + WEIGHTS_CHECK_SECONDS / 2)  # too soon to look again
    assert len(calls) == 1
    watcher.refresh_weights(1000.0 + WEIGHTS_CHECK_SECONDS)
    assert len(calls) == 2
    watcher.refresh_weights(1000.0 + 2 * WEIGHTS_CHECK_SECONDS)  # not due: no refresh
    assert len(calls) == 2


def test_the_mcp_refresher_thread_refreshes_due_lists(
    graph: ContextGraph, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_WEIGHTS_MIN_NOTES", "1")
    before = _refreshed_at(graph)
    halt = background.start_refresher(str(db_path), every=0.05)
    try:
        deadline = time.monotonic() + 30
        while _refreshed_at(graph) == before and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        halt()
    assert _refreshed_at(graph) != before  # the real clock is on another day than NOW


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("read_only", [True, False])
async def test_only_a_writing_server_starts_the_refresher(
    graph: ContextGraph, db_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: bool
) -> None:
    started: list[str] = []

    def record(database: str, every: float = 0.0) -> object:
        started.append(database)
        return lambda: None

    monkeypatch.setattr(mcp_server, "start_refresher", record)
    async with Client(mcp_server.create_server(str(db_path), read_only=read_only)) as client:
        await client.list_tools()
    assert started == ([] if read_only else [str(db_path)])


def test_the_refresher_opens_a_database_not_made_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An MCP server opens its graph at the first tool call; its refresher starts before that.
    monkeypatch.setenv("CONTEXTGRAPH_WEIGHTS_MIN_NOTES", "1")
    new = tmp_path / "new.db"
    halt = background.start_refresher(str(new), every=60)
    halt()
    assert new.exists()
