"""Hostile MCP calls (a hunt, stop 42): arguments taken as written, a database file replaced or
removed under a running server, bad settings, a very deep note.

The SDK parses every string argument whose annotation is not exactly ``str`` as JSON, which
turned an optional text such as ``'{"port": 8080}'`` into an object and ``"null"`` into no value;
and pydantic's lax mode took ``"5"`` or ``true`` for a number and ``"yes"`` for a flag.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers import NOW, remove_deep
from mcp import Client
from test_mcp import anyio_backend, call, fail  # noqa: F401  (a fixture, by its name)

from contextgraph import ContextGraph
from contextgraph.mcp_server import create_server

pytestmark = [pytest.mark.anyio]


@pytest.fixture
async def client(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    async with Client(create_server(str(db_path))) as connected:
        yield connected


async def test_text_that_looks_like_json_is_written_and_replaced_as_text(
    client: Client, vault: Path
) -> None:
    (vault / "config.md").write_text("port: null\n", encoding="utf-8")
    await call(client, "sync", paths=[str(vault)])
    await call(client, "edit_note", identifier="config.md", operation="append", content='{"a": 1}')
    await call(client, "edit_note", identifier="config.md", operation="append", content="[1, 2]")
    await call(
        client,
        "edit_note",
        identifier="config.md",
        operation="replace_text",
        find="null",
        replace="8080",
    )
    text = (vault / "config.md").read_text(encoding="utf-8")
    assert text.startswith("port: 8080\n")
    assert '{"a": 1}' in text and "[1, 2]" in text
    message = await fail(client, "search_memories", query="port", source="null")
    assert "no source named" in message and "null" in message


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_memories", {"query": "alpha", "limit": True}),
        ("search_memories", {"query": "alpha", "limit": "5"}),
        ("build_context", {"concept_name": "alpha", "depth": True}),
        ("build_context", {"concept_name": "alpha", "include_content": "yes"}),
        ("write_note", {"path_or_title": "a.md", "content": "x", "overwrite": 1}),
    ],
)
async def test_a_value_of_another_json_type_is_refused(
    client: Client, tool: str, arguments: dict[str, Any]
) -> None:
    message = await fail(client, tool, **arguments)
    assert "invalid arguments" in message and "\n" not in message


async def test_lists_sent_as_json_text_are_still_taken(client: Client, vault: Path) -> None:
    (vault / "n.md").write_text("[[Kafka]] and [[Raft]]\n", encoding="utf-8")
    await call(client, "sync", paths=[str(vault)])
    data = await call(client, "expand", seeds='["Kafka"]')
    assert data["seeds"] == ["Kafka"]
    assert data["results"]


async def test_a_bad_setting_leaves_the_server_answering_with_one_line(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CONTEXTGRAPH_NOW", "garbage")
    monkeypatch.setenv("CONTEXTGRAPH_WEIGHTS_MIN_NOTES", "1")
    with caplog.at_level(logging.WARNING):
        async with Client(create_server(str(db_path))) as connected:
            message = await fail(connected, "search_memories", query="alpha")
    assert "CONTEXTGRAPH_NOW" in message and "\n" not in message
    assert any("refresher did not start" in r.getMessage() for r in caplog.records)


async def test_a_note_1000_folders_deep_is_written(client: Client, vault: Path) -> None:
    await call(client, "sync", paths=[str(vault)])
    deep = "p/" * 1000 + "x.md"
    try:
        data = await call(client, "write_note", path_or_title=deep, content="deep [[Bottom]]")
        assert data["uri"].endswith("/x.md")
        assert (vault / deep).read_text(encoding="utf-8").endswith("deep [[Bottom]]")
    finally:
        if (vault / "p").exists():
            remove_deep(vault, "p", 1000, "x.md")


async def test_a_database_file_replaced_under_the_server_is_refused_in_one_line(
    client: Client, db_path: Path, vault: Path, tmp_path: Path
) -> None:
    (vault / "a.md").write_text("first [[One]]\n", encoding="utf-8")
    await call(client, "sync", paths=[str(vault)])
    assert (await call(client, "search_memories", query="first"))["total"] == 1
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.md").write_text("second [[Two]]\n", encoding="utf-8")
    with ContextGraph.open(tmp_path / "new.db") as graph:
        graph.sync([other])
    os.replace(tmp_path / "new.db", db_path)  # as a user swaps in a rebuilt store
    for _ in range(2):  # every call, not only the first: the old file is never read again
        message = await fail(client, "search_memories", query="first")
        assert "was replaced while this server ran: restart" in message, message
        assert "\n" not in message


async def test_a_database_file_removed_under_the_server_is_refused_in_one_line(
    client: Client, db_path: Path, vault: Path
) -> None:
    (vault / "a.md").write_text("first [[One]]\n", encoding="utf-8")
    await call(client, "sync", paths=[str(vault)])
    for suffix in ("", "-wal", "-shm"):
        db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
    message = await fail(client, "write_note", path_or_title="n.md", content="x")
    assert "was removed while this server ran: restart" in message, message
    assert not db_path.exists() and not (vault / "n.md").exists()  # nothing made or written


async def test_a_search_of_no_words_finds_nothing_as_on_the_cli(client: Client) -> None:
    data = await call(client, "search_memories", query="")
    assert (data["total"], data["hits"]) == (0, [])
