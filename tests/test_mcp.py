"""The MCP door: tools, schemas, structured results and tool errors, in process and over stdio."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, NOW
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

import contextgraph
from contextgraph import ContextGraph
from contextgraph.mcp_server import create_server

pytestmark = [pytest.mark.anyio, pytest.mark.engines("sqlite", "postgresql")]

READ_TOOLS = {
    "build_context",
    "expand",
    "sync",
    "search_memories",
    "read_memory",
    "visualize",
    "retrieve",
}
WRITE_TOOLS = {"write_note", "edit_note", "move_note", "delete_note"}
TOOLS = READ_TOOLS | WRITE_TOOLS
VAULT = EXAMPLES / "vault"
CODE = EXAMPLES / "code"
HAS_CODEGRAPH = importlib.util.find_spec("contextgraph.code") is not None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    """An in-process client on a server over ``db_url``, with the clock fixed at NOW."""
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    async with Client(create_server(db_url)) as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    data: dict[str, Any] = result.structured_content
    assert isinstance(data, dict)
    return data


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; return its one-line message."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    message = text_of(result)
    assert "\n" not in message and "Traceback" not in message
    return message


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def as_json(data: Any) -> Any:
    return json.loads(json.dumps(data))


async def test_tools_are_listed_with_bounded_parameters(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    bounds = {
        ("build_context", "depth"): (0, 5),
        ("build_context", "max_entities"): (1, 100),
        ("expand", "max_depth"): (1, 5),
        ("expand", "max_nodes"): (1, 500),
        ("search_memories", "limit"): (1, 100),
        ("visualize", "depth"): (1, 5),
        ("visualize", "max_nodes"): (5, 100),
        ("retrieve", "k"): (1, 50),
        ("retrieve", "budget_tokens"): (100, 100_000),
    }
    for (name, param), (low, high) in bounds.items():
        schema = tools[name].input_schema["properties"][param]
        # A parameter whose default is a setting may be null: its bound is on the integer.
        schema = next((s for s in schema.get("anyOf", ()) if s["type"] == "integer"), schema)
        assert (schema["minimum"], schema["maximum"]) == (low, high), (name, param)
    assert tools["search_memories"].input_schema["properties"]["page"]["minimum"] == 1
    concept = tools["build_context"].input_schema["properties"]["concept_name"]
    assert (concept["minLength"], concept["maxLength"]) == (1, 1000)
    seeds = tools["expand"].input_schema["properties"]["seeds"]
    assert (seeds["minItems"], seeds["maxItems"]) == (1, 100)
    assert tools["read_memory"].input_schema["properties"]["identifier"]["maxLength"] == 4096
    assert tools["sync"].input_schema.get("required", []) == []
    assert tools["sync"].input_schema["properties"]["paths"]["maxItems"] == 100
    for tool in tools.values():
        assert tool.description and "Examples:" in tool.description
        assert not tool.description.startswith(" "), "descriptions are dedented"
        assert tool.output_schema is not None
    assert tools["build_context"].annotations is not None
    assert tools["build_context"].annotations.read_only_hint is True
    assert tools["sync"].annotations is not None
    assert tools["sync"].annotations.read_only_hint is False


async def test_build_context_tool_returns_what_the_library_returns(
    client: Client, store: ContextGraph
) -> None:
    report = await call(client, "sync", paths=[str(VAULT)])
    assert report["sources"] == ["vault"] and report["files"]["added"] > 0
    got = await call(client, "build_context", concept_name="Machine Learning")
    expected = store.build_context("Machine Learning", depth=2, max_entities=20).as_dict()
    assert got == as_json(expected)
    assert got["conceptName"] == "machine-learning" and got["directRelations"]
    got = await call(client, "build_context", concept_name="Kafka", depth=1, include_content=True)
    expected = store.build_context("Kafka", depth=1, include_content=True).as_dict()
    assert got == as_json(expected)


async def test_default_limits_are_the_servers_settings_as_for_the_cli(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool argument left out takes the CONTEXTGRAPH_* setting, as the CLI's flag does."""
    monkeypatch.setenv("CONTEXTGRAPH_NOW", NOW)
    monkeypatch.setenv("CONTEXTGRAPH_MAX_ENTITIES", "1")
    monkeypatch.setenv("CONTEXTGRAPH_EXPAND_MAX_NODES", "2")
    monkeypatch.setenv("CONTEXTGRAPH_SEARCH_LIMIT", "1")
    monkeypatch.setenv("CONTEXTGRAPH_RETRIEVE_K", "2")
    monkeypatch.setenv("CONTEXTGRAPH_VISUALIZE_MAX_NODES", "5")
    async with Client(create_server(db_url)) as configured:
        await call(configured, "sync", paths=[str(VAULT)])
        context = await call(configured, "build_context", concept_name="Machine Learning")
        assert len(context["directRelations"]) == 1
        wider = await call(
            configured, "build_context", concept_name="Machine Learning", max_entities=3
        )
        assert len(wider["directRelations"]) == 3
        expanded = await call(configured, "expand", seeds=["Machine Learning"])
        assert len(expanded["results"]) == 2
        found = await call(configured, "search_memories", query="learning")
        assert (found["limit"], len(found["hits"])) == (1, 1)
        retrieved = await call(configured, "retrieve", query="machine learning")
        assert (retrieved["k"], len(retrieved["items"])) == (2, 2)
        picture = await call(configured, "visualize", concept_name="Machine Learning")
        drawn = {line.split("[")[0].strip() for line in picture["mermaid"].splitlines()}
        assert len({n for n in drawn if n.startswith("n") and n[1:].isdigit()}) == 5


async def test_sync_with_no_paths_resyncs_the_registered_sources(client: Client) -> None:
    await call(client, "sync", paths=[str(VAULT)], name="notes")
    again = await call(client, "sync")
    assert again["sources"] == ["notes"]
    assert again["files"]["added"] == 0 and again["files"]["unchanged"] > 0


async def test_sync_with_nothing_registered_is_a_tool_error(client: Client) -> None:
    assert "no sources registered" in await fail(client, "sync")


async def test_search_memories_finds_a_word_and_read_memory_reads_the_hit(
    client: Client,
) -> None:
    await call(client, "sync", paths=[str(VAULT)])
    found = await call(client, "search_memories", query="kafka", limit=3)
    assert found["total"] > 0 and 0 < len(found["hits"]) <= 3
    uri = found["hits"][0]["uri"]
    assert uri.startswith("memory://vault/")
    note = await call(client, "read_memory", identifier=uri)
    assert note["uri"] == uri
    assert "kafka" in note["content"].lower()
    assert note["lastAccessed"] is not None


async def test_visualize_returns_a_mermaid_flowchart(client: Client) -> None:
    await call(client, "sync", paths=[str(VAULT)])
    result = await client.call_tool("visualize", {"concept_name": "Raft", "depth": 1})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["concept"] == "Raft"
    mermaid = result.structured_content["mermaid"]
    assert mermaid.startswith("flowchart")
    assert text_of(result) == mermaid  # the text block is the diagram itself, not JSON


async def test_out_of_range_depth_is_a_one_line_tool_error(client: Client) -> None:
    message = await fail(client, "build_context", concept_name="Raft", depth=9)
    assert "depth" in message and "less than or equal to 5" in message
    message = await fail(client, "expand", seeds=[])
    assert "seeds" in message


async def test_path_escape_is_a_tool_error_and_the_server_keeps_working(client: Client) -> None:
    await call(client, "sync", paths=[str(VAULT)])
    message = await fail(client, "read_memory", identifier="../../etc/passwd")
    assert "refused" in message and "root:" not in message
    found = await call(client, "search_memories", query="raft")
    assert found["total"] > 0


async def test_unexpected_exception_is_a_short_tool_error_with_the_traceback_logged(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: ContextGraph, query: str, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(ContextGraph, "search", broken)
    with caplog.at_level(logging.ERROR, logger="contextgraph.mcp_tools"):
        message = await fail(client, "search_memories", query="raft")
    assert "unexpected error: RuntimeError: disk on fire second line" in message
    logged = [r for r in caplog.records if r.name == "contextgraph.mcp_tools"]
    assert logged and logged[0].exc_info is not None
    assert (await call(client, "build_context", concept_name="raft"))["conceptName"] == "raft"


async def test_the_graph_is_opened_once_on_the_first_call(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real_open = ContextGraph.open

    def counting_open(path: Any, **kwargs: Any) -> ContextGraph:
        opened.append(str(path))
        return real_open(path, **kwargs)

    monkeypatch.setattr(ContextGraph, "open", counting_open)
    server = create_server(str(db_path))
    assert opened == []
    async with Client(server) as connected:
        assert opened == []
        await call(connected, "search_memories", query="anything")
        await call(connected, "build_context", concept_name="anything")
    assert opened == [str(db_path)]


@pytest.mark.xfail(not HAS_CODEGRAPH, reason="contextgraph.code is not built yet")
async def test_expand_follows_code_references(client: Client, store: ContextGraph) -> None:
    await call(client, "sync", paths=[str(CODE)])
    got = await call(client, "expand", seeds=["TokenValidator"])
    assert got["matchedSeeds"] == ["TokenValidator"]
    assert "AuthenticationService" in {r["entity"] for r in got["results"]}
    assert got == as_json(store.expand(["TokenValidator"], max_depth=2, max_nodes=20).as_dict())


async def test_stdio_server_speaks_only_protocol_on_stdout(
    tmp_path: Path, db_url: str, store: ContextGraph
) -> None:
    store.sync([VAULT])
    repo = Path(contextgraph.__file__).resolve().parents[1]
    python_path = os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextgraph", "--db", db_url, "mcp"],
        env={**os.environ, "CONTEXTGRAPH_DB": db_url, "PYTHONPATH": python_path},
        cwd=str(tmp_path),
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as connected:
            assert connected.server_info is not None
            assert connected.server_info.name == "contextgraph"
            names = {tool.name for tool in (await connected.list_tools()).tools}
            assert names == TOOLS
            found = await call(connected, "search_memories", query="kafka")
            assert found["total"] > 0
            message = await fail(connected, "read_memory", identifier="/etc/passwd")
            assert "read_memory" in message
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


# -- issue 10/12: honest annotations, real schemas, strict arguments -----------------------------


async def test_annotations_say_what_each_tool_does(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    hints = {name: tool.annotations for name, tool in tools.items()}
    assert all(h is not None for h in hints.values())
    for name in ("build_context", "expand", "search_memories", "visualize"):
        assert hints[name].read_only_hint is True, name  # type: ignore[union-attr]
    # read_memory records the read (lastAccessed): it is not read-only
    assert hints["read_memory"].read_only_hint is False  # type: ignore[union-attr]
    assert hints["read_memory"].destructive_hint is False  # type: ignore[union-attr]
    for name in WRITE_TOOLS:
        assert hints[name].read_only_hint is False, name  # type: ignore[union-attr]
        assert hints[name].destructive_hint is True, name  # type: ignore[union-attr]
    assert hints["delete_note"].idempotent_hint is True  # type: ignore[union-attr]
    assert hints["edit_note"].idempotent_hint is False  # type: ignore[union-attr]
    for name in WRITE_TOOLS:
        assert "Examples:" in (tools[name].description or "")


async def test_every_tool_publishes_a_real_output_schema_that_its_results_fit(
    client: Client, vault: Path
) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, tool in tools.items():
        schema = tool.output_schema
        assert schema is not None and schema.get("properties"), name
        assert schema.get("required"), name
    (vault / "n.md").write_text("Note about [[Kafka]] and [[Raft]]\n")
    results = {
        "sync": await call(client, "sync", paths=[str(vault)]),
        "build_context": await call(client, "build_context", concept_name="Kafka"),
        "search_memories": await call(client, "search_memories", query="kafka"),
        "read_memory": await call(client, "read_memory", identifier="n.md"),
        "expand": await call(client, "expand", seeds=["Kafka"]),
        "visualize": await call(client, "visualize", concept_name="Kafka"),
        "write_note": await call(client, "write_note", path_or_title="w.md", content="[[W]]"),
        "retrieve": await call(client, "retrieve", query="note about kafka"),
    }
    for name, data in results.items():
        properties = tools[name].output_schema["properties"]  # type: ignore[index]
        assert set(data) == set(properties), name


async def test_retrieve_tool_returns_what_the_library_returns(
    client: Client, store: ContextGraph
) -> None:
    await call(client, "sync", paths=[str(VAULT)])
    got = await call(client, "retrieve", query="machine learning models", k=3)
    expected = store.retrieve("machine learning models", k=3).as_dict()
    assert got == as_json(expected)
    assert got["items"] and got["items"][0]["uri"].startswith("memory://vault/")
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    annotations = tools["retrieve"].annotations
    assert annotations is not None and annotations.read_only_hint is True
    message = await fail(client, "retrieve", query="   ")
    assert "give a question" in message


async def test_unknown_arguments_are_an_error(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for tool in tools.values():
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    message = await fail(client, "build_context", concept_name="Raft", dept=1)
    assert "dept" in message and "invalid arguments" in message
    message = await fail(client, "search_memories", query="x", page=1_000_001)
    assert "page" in message
    search = tools["search_memories"].input_schema["properties"]
    assert (search["page"]["minimum"], search["page"]["maximum"]) == (1, 1_000_000)


# -- the write tools -------------------------------------------------------------------------


async def test_write_tools_change_the_notes_and_the_graph_follows(
    client: Client, vault: Path
) -> None:
    (vault / "seed.md").write_text("Seed [[Alpha]]\n")
    await call(client, "sync", paths=[str(vault)])
    written = await call(
        client, "write_note", path_or_title="Kafka lag", content="Lag in [[Kafka]] [[Alpha]]\n"
    )
    assert written["uri"] == "memory://vault/Kafka lag.md" and written["action"] == "created"
    assert written["concepts"] == ["alpha", "kafka"]
    found = await call(client, "search_memories", query="lag")
    assert [h["uri"] for h in found["hits"]] == [written["uri"]]
    read = await call(client, "read_memory", identifier=written["uri"])
    assert read["hash"] == written["hash"]
    edited = await call(
        client,
        "edit_note",
        identifier=written["uri"],
        operation="replace_text",
        find="Lag",
        replace="Latency",
        expected_hash=read["hash"],
    )
    assert edited["action"] == "edited"
    message = await fail(
        client,
        "edit_note",
        identifier=written["uri"],
        operation="append",
        content="late",
        expected_hash=read["hash"],
    )
    assert "changed since it was read" in message
    moved = await call(client, "move_note", identifier=written["uri"], new_path="eng/lag.md")
    assert moved["previousUri"] == written["uri"] and (vault / "eng" / "lag.md").exists()
    gone = await call(client, "delete_note", identifier=moved["uri"])
    assert gone["action"] == "deleted" and not (vault / "eng" / "lag.md").exists()
    assert (await call(client, "search_memories", query="latency"))["total"] == 0


async def test_hostile_write_paths_are_one_line_tool_errors(client: Client, vault: Path) -> None:
    await call(client, "sync", paths=[str(vault)])
    for path in ("../x.md", "/etc/x.md", ".git/x.md", "%2e%2e/x.md", "memory://vault/x.py"):
        message = await fail(client, "write_note", path_or_title=path, content="x")
        assert "write_note" in message
    message = await fail(client, "edit_note", identifier="seed.md", operation="truncate")
    assert "operation" in message
    assert sorted(p.name for p in vault.iterdir()) == []


async def test_a_read_only_server_offers_no_write_tool_and_registers_nothing(
    db_url: str, vault: Path, tmp_path: Path, store: ContextGraph
) -> None:
    store.sync([vault])
    other = tmp_path / "other"
    other.mkdir()
    async with Client(create_server(db_url, read_only=True)) as connected:
        names = {tool.name for tool in (await connected.list_tools()).tools}
        assert names == READ_TOOLS
        message = await fail(connected, "write_note", path_or_title="x.md", content="x")
        assert "Unknown tool" in message
        message = await fail(connected, "sync", paths=[str(other)])
        assert "not a registered source" in message
        assert (await call(connected, "sync", paths=[str(vault)]))["sources"] == ["vault"]
        assert (await call(connected, "sync"))["sources"] == ["vault"]
    assert [s.name for s in store.sources()] == ["vault"]


async def test_a_read_only_server_on_a_missing_database_creates_none(db_path: Path) -> None:
    async with Client(create_server(str(db_path), read_only=True)) as connected:
        for tool, args in (("search_memories", {"query": "x"}), ("sync", {})):
            message = await fail(connected, tool, **args)
            assert "no database at " in message, message
    assert not db_path.exists()


async def test_allow_bounds_which_folders_sync_may_register(db_path: Path, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "notes").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with Client(create_server(str(db_path), allow=[str(allowed)])) as connected:
        message = await fail(connected, "sync", paths=[str(elsewhere)])
        assert "outside the folders" in message
        report = await call(connected, "sync", paths=[str(allowed / "notes")])
        assert report["sources"] == ["notes"]


@pytest.mark.slow
async def test_mcp_watch_keeps_the_graph_in_step(
    db_url: str, vault: Path, store: ContextGraph
) -> None:
    import anyio

    (vault / "a.md").write_text("Alpha [[A]]\n")
    store.sync([vault])
    async with Client(create_server(db_url, watch=True)) as connected:
        await anyio.sleep(1.0)  # the watcher's catch-up sync and OS watch
        (vault / "b.md").write_text("Bravo written behind the server's back [[B]]\n")
        for _ in range(100):
            found = await call(connected, "search_memories", query="bravo")
            if found["total"]:
                break
            await anyio.sleep(0.1)
        assert found["total"] == 1


@pytest.mark.engines("sqlite")
@pytest.mark.parametrize("database", ["damaged", "memory", "bad setting"])
async def test_a_watch_that_cannot_start_leaves_the_server_answering(
    tmp_path: Path,
    database: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``mcp --watch`` on a damaged file, on ``:memory:`` (a second open would watch another,
    empty database) or with a bad setting: the server starts, logs one line, and each tool
    says what is wrong, as without ``--watch``."""
    path = str(tmp_path / "g.db")
    if database == "damaged":
        Path(path).write_bytes(os.urandom(4096))
    elif database == "memory":
        path = ":memory:"
    else:
        monkeypatch.setenv("CONTEXTGRAPH_BATCH_FILES", "0")
    with caplog.at_level(logging.WARNING, logger="contextgraph.mcp_server"):
        async with Client(create_server(path, watch=True)) as connected:
            names = {tool.name for tool in (await connected.list_tools()).tools}
            assert "search_memories" in names
    warned = [r.getMessage() for r in caplog.records if "watcher did not start" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0], caplog.records


async def test_stdio_server_started_read_only_lists_only_the_reading_tools(
    tmp_path: Path, db_url: str, store: ContextGraph
) -> None:
    repo = Path(contextgraph.__file__).resolve().parents[1]
    python_path = os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextgraph", "--db", db_url, "mcp", "--read-only"],
        env={**os.environ, "PYTHONPATH": python_path},
        cwd=str(tmp_path),
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as connected:
            names = {tool.name for tool in (await connected.list_tools()).tools}
            assert names == READ_TOOLS
