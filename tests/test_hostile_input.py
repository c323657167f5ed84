"""Hostile names, queries and paths through every door (SPEC §9, §12).

The library raises only ``ContextGraphError`` subclasses or returns empty results; the CLI exits
0, 1 or 2 without a traceback; the MCP tools answer or return a one-line tool error. Nothing is
injected (no SQL, no FTS5 syntax, no LIKE wildcard widens a match), the schema is unchanged, and
no path escapes its source or serves the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import child_env
from sqlalchemy import text

from contextgraph import (
    ContextGraph,
    ContextGraphError,
    InvalidArgument,
    NotFound,
    Settings,
    UnsafePath,
)
from contextgraph.cli import cli
from contextgraph.graph.ftsquery import query_terms
from contextgraph.store import db

REPO = Path(__file__).resolve().parents[1]
SECRET = "TOP SECRET outside the vault"

PAYLOADS: dict[str, str] = {
    "sql-drop": "'; DROP TABLE files; --",
    "sql-or": '" OR 1=1',
    "sql-or-quoted": "' OR '1'='1",
    "sql-union": "x' UNION SELECT path, text FROM files --",
    "fts-near": "NEAR(",
    "fts-near-full": "NEAR(alpha beta, 2)",
    "fts-quote": '"',
    "fts-unbalanced": '"alpha',
    "fts-star": "*",
    "fts-prefix": "alph*",
    "fts-column": "col:x",
    "fts-column-real": "text:alpha",
    "fts-operators": "AND OR NOT",
    "fts-caret": "^alpha",
    "fts-parens": "(alpha) OR (beta",
    "fts-plus-minus": "-alpha +beta",
    "like-percent": "%",
    "like-underscore": "_",
    "like-mixed": "%_%",
    "like-escape": "\\%",
    "lone-surrogate": "\ud800",
    "surrogate-escape": "caf\udce9",
    "nul": "alpha\x00beta",
    "control": "\x1b[31mred\x07",
    "newline": "alpha\nbeta",
    "huge": "x" * 1_000_000,
    "huge-words": "alpha " * 200_000,
    "mermaid": 'a"]; click n1 call evil()%%',
    "wikilink": "[[Alpha|x]]",
    "empty": "",
    "blank": "   ",
}
# Payloads that name nothing in the test vault: every answer to them must be empty.
NAMES_NOTHING = set(PAYLOADS) - {
    "fts-near-full",
    "fts-unbalanced",
    "fts-prefix",
    "fts-column-real",
    "fts-caret",
    "fts-parens",
    "fts-plus-minus",
    "nul",
    "newline",
    "huge-words",
    "wikilink",
    "empty",
    "blank",
}


@dataclass
class World:
    root: Path
    vault: Path
    database: Path
    graph: ContextGraph
    schema: list[tuple[Any, ...]]
    files: int


def schema_of(graph: ContextGraph) -> list[tuple[Any, ...]]:
    with db.read(graph.engine) as conn:
        return [
            tuple(r)
            for r in conn.execute(
                text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
            )
        ]


def file_count(graph: ContextGraph) -> int:
    with db.read(graph.engine) as conn:
        return int(conn.execute(text("SELECT count(*) FROM files")).scalar_one())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A vault holding its own database, a secret outside, and notes swapped for symlinks."""
    root = tmp_path_factory.mktemp("hostile")
    vault = root / "vault"
    (vault / "x").mkdir(parents=True)
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET, encoding="utf-8")
    (vault / "a.md").write_text("[[Alpha]] [[Beta]] alpha beta words\n", encoding="utf-8")
    (vault / "x" / "b.md").write_text("[[Alpha]] [[Gamma]] gamma words\n", encoding="utf-8")
    (vault / "pct%.md").write_text("[[Percent]] [[Alpha]]\n", encoding="utf-8")
    (vault / "swap.md").write_text("[[Swap]]\n", encoding="utf-8")
    (vault / "dbswap.md").write_text("[[Dbswap]]\n", encoding="utf-8")
    os.symlink(outside / "secret.md", vault / "link-out.md")
    os.symlink(outside, vault / "dir-out")
    database = vault / "graph.db"
    graph = ContextGraph.open(database, settings=Settings())
    graph.sync([vault])
    # Swapped for symlinks after the sync: the store still lists them as notes.
    (vault / "swap.md").unlink()
    os.symlink(outside / "secret.md", vault / "swap.md")
    (vault / "dbswap.md").unlink()
    os.symlink(database, vault / "dbswap.md")
    os.symlink(database, vault / "db-link.md")
    yield World(root, vault, database, graph, schema_of(graph), file_count(graph))
    graph.close()


@pytest.fixture
def graph(world: World) -> Iterator[ContextGraph]:
    yield world.graph
    assert schema_of(world.graph) == world.schema  # nothing dropped, created or altered
    assert file_count(world.graph) == world.files


# -- the library -------------------------------------------------------------------------------

Operation = Callable[[ContextGraph, str], Any]
OPERATIONS: dict[str, Operation] = {
    "build_context": lambda g, p: g.build_context(p),
    "build_context_content": lambda g, p: g.build_context(p, include_content=True, depth=3),
    "expand": lambda g, p: g.expand([p]),
    "expand_many": lambda g, p: g.expand([p, "alpha"]),
    "search": lambda g, p: g.search(p),
    "search_folder": lambda g, p: g.search("words", folder=p),
    "search_source": lambda g, p: g.search("words", source=p),
    "read": lambda g, p: g.read(p),
    "visualize": lambda g, p: g.visualize(p),
}


def _injection(operation: str, name: str, result: Any, vault: Path) -> str | None:
    """What is wrong with ``result``, an answer to payload ``name`` (None: nothing)."""
    if operation == "read":
        return "read returned a note"
    if name not in NAMES_NOTHING:
        return None
    if operation.startswith("build_context"):
        if result.direct_relations or result.expanded_relations:
            return "build_context found relations"
    elif operation == "expand":
        if result.matched or result.results:
            return f"expand matched {result.matched}"
    elif operation == "expand_many":
        if not {r.entity for r in result.results} <= {"beta", "gamma", "percent"}:
            return "expand returned more than alpha's neighbours"
    elif operation == "search":
        # Any word of the payload may match (SPEC §9): every hit must hold one in its path or
        # text, in some spelling — never a file the words do not name.
        terms = query_terms(PAYLOADS[name])
        words = {w.lower() for t in terms for w in " ".join(t.spellings).split()}
        for hit in result.hits:
            held = (hit.path + " " + (vault / hit.path).read_text(encoding="utf-8")).lower()
            if not any(w in held for w in words):
                return f"search matched {hit.path}, which holds none of the words"
    elif operation in ("search_folder", "search_source"):
        if result.total or result.hits:
            return f"search matched {result.total} files"
    elif operation == "visualize":
        lines = result.splitlines()
        if not result.startswith("flowchart") or '"]; click' in result:
            return "the diagram was broken"
        if any(line.lstrip().startswith("click") for line in lines):
            return "the diagram gained a click directive"
    return None


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_library_raises_only_its_own_errors_and_injects_nothing(
    graph: ContextGraph, world: World, payload: str
) -> None:
    name = next(k for k, v in PAYLOADS.items() if v == payload)
    problems = []
    for operation, call in OPERATIONS.items():
        try:
            result = call(graph, payload)
        except ContextGraphError as exc:
            if not str(exc) or "\n" in str(exc)[:200]:
                problems.append(f"{operation}: unclear message {str(exc)[:80]!r}")
            continue
        except Exception as exc:  # the bug this test is here for
            problems.append(f"{operation}: raised {type(exc).__name__}: {str(exc)[:120]}")
            continue
        wrong = _injection(operation, name, result, world.vault)
        if wrong:
            problems.append(f"{operation}: {wrong}")
    assert problems == []


def test_like_wildcards_do_not_widen_matches(graph: ContextGraph) -> None:
    assert graph.search("words", folder="x").total == 1  # the real folder
    for wildcard in ("%", "_", "%_%", "x%", "_%"):
        assert graph.search("words", folder=wildcard).total == 0, wildcard
        with pytest.raises(NotFound):
            graph.search("words", source=wildcard)  # no source has that name
        assert graph.expand([wildcard]).matched == (), wildcard
        with pytest.raises(NotFound):
            graph.read(wildcard)  # "_" would match the one-letter stem "a" as a LIKE
    assert graph.read("pct%").path == "pct%.md"  # a literal % still finds its own note
    assert graph.read("memory://vault/pct%.md").content.startswith("[[Percent]]")


def test_sql_and_fts_payloads_are_text_not_syntax(graph: ContextGraph) -> None:
    assert graph.search("beta").total == 1
    assert graph.search('"alpha beta"').total == 1
    # OR and NOT are words here (stopwords, so ignored), never operators.
    assert graph.search("alpha OR gamma").total == 3
    assert graph.search("alpha OR gamma", all_words=True).total == 1  # x/b.md holds both
    assert graph.search("NOT gamma").total == 1  # no negation: the one file with gamma
    assert graph.search("'; DROP TABLE files; --").total == 0
    assert graph.build_context("'; DROP TABLE files; --").direct_relations == ()
    assert graph.search("words").total == 2  # every table still there


def test_a_wikilink_payload_names_its_target(graph: ContextGraph) -> None:
    assert {r.name for r in graph.build_context("[[Alpha|x]]").direct_relations} == {
        "beta",
        "gamma",
        "percent",
    }


# -- the CLI -------------------------------------------------------------------------------------

CLI_COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "context": lambda p: ["context", p, "--json"],
    "context-content": lambda p: ["context", p, "--include-content", "--json"],
    "expand": lambda p: ["expand", p, "--json"],
    "search": lambda p: ["search", p, "--json"],
    "search-folder": lambda p: ["search", "words", "--folder", p, "--json"],
    "search-source": lambda p: ["search", "words", "--source", p, "--json"],
    "read": lambda p: ["read", p, "--json"],
    "visualize": lambda p: ["visualize", p],
}


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_cli_exits_cleanly_on_hostile_input(
    world: World, graph: ContextGraph, payload: str
) -> None:
    runner = CliRunner()
    for command, argv in CLI_COMMANDS.items():
        result = runner.invoke(cli, ["--db", str(world.database), *argv(payload)])
        where = f"{command}: exit {result.exit_code}: {result.output[-300:]!r}"
        assert result.exit_code in (0, 1, 2), where
        assert result.exception is None or isinstance(result.exception, SystemExit), where
        assert "Traceback" not in result.output, where
        assert SECRET not in result.output, where
        if result.exit_code == 1:
            assert result.stderr.strip() and "\n" not in result.stderr.strip(), where
        if result.exit_code == 0 and "--json" in argv(payload):
            json.loads(result.stdout)
        if command == "read":
            assert result.exit_code != 0, where


def test_cli_takes_undecodable_argv_bytes_without_a_traceback(world: World) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape)."""
    env = child_env(LC_ALL="C.UTF-8", LANG="C.UTF-8")
    for args in ([b"context", b"caf\xe9 \xff", b"--json"],):
        proc = subprocess.run(
            [
                sys.executable.encode(),
                b"-m",
                b"contextgraph",
                b"--db",
                bytes(world.database),
                *args,
            ],
            env=env,
            capture_output=True,
            timeout=120,
        )
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode in (0, 1), err
        assert "Traceback" not in err, err
        if proc.returncode == 1:
            assert len(err.strip().splitlines()) == 1, err


# -- the MCP tools -------------------------------------------------------------------------------

MCP_CALLS: dict[str, Callable[[str], tuple[str, dict[str, Any]]]] = {
    "build_context": lambda p: ("build_context", {"concept_name": p}),
    "expand": lambda p: ("expand", {"seeds": [p]}),
    "search_memories": lambda p: ("search_memories", {"query": p}),
    "search_folder": lambda p: ("search_memories", {"query": "words", "folder": p}),
    "read_memory": lambda p: ("read_memory", {"identifier": p}),
    "visualize": lambda p: ("visualize", {"concept_name": p}),
}


def _mcp_available() -> bool:
    try:
        import mcp  # noqa: F401

        from contextgraph import mcp_server  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.skipif(not _mcp_available(), reason="contextgraph.mcp_server is not there yet")
@pytest.mark.anyio
@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
async def test_mcp_tools_answer_or_fail_in_one_line(
    world: World, graph: ContextGraph, payload: str
) -> None:
    from mcp import Client

    from contextgraph.mcp_server import create_server

    async with Client(create_server(str(world.database))) as client:
        for label, make in MCP_CALLS.items():
            tool, arguments = make(payload)
            result = await client.call_tool(tool, arguments)
            message = _text(result)
            assert SECRET not in message, label
            if result.is_error:
                assert "\n" not in message.strip() and "Traceback" not in message, label
            elif label == "read_memory":
                pytest.fail(f"read_memory({payload[:40]!r}) returned a note")
        alive = await client.call_tool("search_memories", {"query": "words"})
        assert not alive.is_error and alive.structured_content["total"] == 2


# -- path traversal --------------------------------------------------------------------------------

REFUSED = (UnsafePath, NotFound)
TRAVERSALS: dict[str, str] = {
    "dotdot": "../x",
    "dotdot-secret": "../outside/secret.md",
    "dotdot-backslash": "..\\x",
    "dotdot-backslash-secret": "..\\outside\\secret.md",
    "dotdot-inside": "x/../../outside/secret.md",
    "dotdot-deep": "x/" + "../" * 20 + "etc/passwd",
    "absolute": "/etc/passwd",
    "absolute-secret": "{outside}/secret.md",
    "home": "~/.ssh/id_rsa",
    "windows-drive": "C:\\Windows\\win.ini",
    "unc": "\\\\server\\share\\x.md",
    "uri-dotdot": "memory://vault/../../etc/passwd",
    "uri-dotdot-secret": "memory://vault/../outside/secret.md",
    "uri-absolute": "memory://vault//etc/passwd",
    "uri-empty-source": "memory:///etc/passwd",  # malformed: InvalidArgument is a refusal too
    "uri-source-dotdot": "memory://../vault/a.md",
    "encoded-dots": "%2e%2e/x",
    "encoded-slash": "..%2fx",
    "encoded-upper": "%2E%2E%2Foutside%2Fsecret.md",
    "double-encoded": "%252e%252e/x",
    "encoded-backslash": "..%5cx",
    "encoded-nul": "a.md%00.txt",
    "overlong-utf8": "%c0%ae%c0%ae/x",
    "file-uri": "file:///etc/passwd",
    "http-uri": "http://example.com/x.md",
    "nul-inside": "a.md\x00../../etc/passwd",
    "uri-nul": "memory://vault/a.md\x00",
    "database": "graph.db",
    "database-uri": "memory://vault/graph.db",
    "database-wal": "graph.db-wal",
    "database-shm": "graph.db-shm",
    "database-lock": "graph.db.sync.lock",
    "symlink-to-database": "db-link.md",
    "note-swapped-for-database-link": "dbswap.md",
    "note-swapped-for-database-link-uri": "memory://vault/dbswap.md",
    "symlink-out": "link-out.md",
    "symlink-dir-out": "dir-out/secret.md",
    "note-swapped-for-symlink-out": "swap.md",
    "note-swapped-for-symlink-out-uri": "memory://vault/swap.md",
    "note-swapped-by-title": "swap",
}


@pytest.mark.parametrize("payload", list(TRAVERSALS.values()), ids=list(TRAVERSALS))
def test_read_refuses_every_path_outside_its_source(
    world: World, graph: ContextGraph, payload: str
) -> None:
    identifier = payload.format(outside=world.root / "outside")
    refused = (*REFUSED, InvalidArgument) if payload == TRAVERSALS["uri-empty-source"] else REFUSED
    with pytest.raises(refused) as caught:
        graph.read(identifier)
    message = str(caught.value)
    assert message and "\n" not in message and SECRET not in message
    if "swapped" in next(k for k, v in TRAVERSALS.items() if v == payload):
        assert caught.type is UnsafePath  # the file is known; its target is what is refused
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(world.database), "read", identifier, "--json"])
    assert result.exit_code == 1, result.output
    assert SECRET not in result.output and "SQLite format" not in result.output
    assert "Traceback" not in result.output


@pytest.mark.skipif(not _mcp_available(), reason="contextgraph.mcp_server is not there yet")
@pytest.mark.anyio
async def test_read_memory_refuses_every_path_outside_its_source(
    world: World, graph: ContextGraph
) -> None:
    from mcp import Client

    from contextgraph.mcp_server import create_server

    async with Client(create_server(str(world.database))) as client:
        for label, payload in TRAVERSALS.items():
            identifier = payload.format(outside=world.root / "outside")
            result = await client.call_tool("read_memory", {"identifier": identifier})
            message = _text(result)
            assert result.is_error, label
            assert SECRET not in message and "SQLite format" not in message, label
        ok = await client.call_tool("read_memory", {"identifier": "memory://vault/a.md"})
        assert not ok.is_error


def test_read_serves_the_notes_it_should(graph: ContextGraph) -> None:
    """The control: the refusals above are not a read() that refuses everything."""
    assert graph.read("a.md").content.startswith("[[Alpha]]")
    assert graph.read("memory://vault/x/b.md").path == "x/b.md"
    assert graph.read("./x/b.md").path == "x/b.md"
    assert graph.read("a").uri == "memory://vault/a.md"


# -- one bound per text argument, the same at every door ---------------------------------------

# (bound, library call, CLI arguments, MCP tool and arguments) for every bounded text argument.
TextCase = tuple[
    Any,
    Callable[[ContextGraph, str], Any],
    Callable[[str], list[str]],
    Callable[[str], tuple[str, dict[str, Any]]],
]


def _text_cases() -> dict[str, TextCase]:
    from contextgraph import limits

    return {
        "context": (
            limits.NAME,
            lambda g, v: g.build_context(v),
            lambda v: ["context", v],
            lambda v: ("build_context", {"concept_name": v}),
        ),
        "expand": (
            limits.NAME,
            lambda g, v: g.expand([v]),
            lambda v: ["expand", v],
            lambda v: ("expand", {"seeds": [v]}),
        ),
        "visualize": (
            limits.NAME,
            lambda g, v: g.visualize(v),
            lambda v: ["visualize", v],
            lambda v: ("visualize", {"concept_name": v}),
        ),
        "find": (
            limits.EDIT_FIND,
            lambda g, v: g.edit_note("a.md", "replace_text", find=v, replace="y"),
            lambda v: ["edit", "a.md", "--find", v, "--replace", "y"],
            lambda v: (
                "edit_note",
                {"identifier": "a.md", "operation": "replace_text", "find": v, "replace": "y"},
            ),
        ),
        "heading": (
            limits.EDIT_HEADING,
            lambda g, v: g.edit_note("a.md", "replace_section", heading=v, content="y"),
            lambda v: ["edit", "a.md", "--section", v, "--content", "y"],
            lambda v: (
                "edit_note",
                {
                    "identifier": "a.md",
                    "operation": "replace_section",
                    "heading": v,
                    "content": "y",
                },
            ),
        ),
        "expected-hash": (
            limits.EXPECTED_HASH,
            lambda g, v: g.write_note("a.md", "x", overwrite=True, expected_hash=v),
            lambda v: ["write", "a.md", "--content", "x", "--overwrite", "--expected-hash", v],
            lambda v: (
                "write_note",
                {"path_or_title": "a.md", "content": "x", "overwrite": True, "expected_hash": v},
            ),
        ),
    }


@pytest.mark.anyio
async def test_every_text_bound_is_one_definition_at_every_door(tmp_path: Path) -> None:
    """A value one character over its bound is refused by the library, the CLI and the MCP
    server alike; one at the bound is not refused for its length anywhere."""
    from mcp import Client

    from contextgraph.mcp_server import create_server

    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n[[Alpha]] [[Beta]] alpha\n", encoding="utf-8")
    (vault / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")  # a file entity
    database = tmp_path / "g.db"
    graph = ContextGraph.open(database)
    graph.sync([vault])
    before = (vault / "a.md").read_bytes()
    runner = CliRunner()
    problems = []
    async with Client(create_server(str(database))) as client:
        for label, (bound, call, argv, mcp_call) in _text_cases().items():
            for value, over in (("x" * bound.high, False), ("x" * (bound.high + 1), True)):
                where = f"{label} ({len(value)} characters)"
                try:
                    call(graph, value)
                    refused_for_length = False
                except ContextGraphError as exc:
                    refused_for_length = "characters long" in str(exc)
                except Exception as exc:  # the bug: SQLite's "LIKE pattern too complex"
                    problems.append(f"library {where}: {type(exc).__name__}: {exc}")
                    continue
                if refused_for_length != over:
                    problems.append(f"library {where}: refused for length: {refused_for_length}")
                result = runner.invoke(cli, ["--db", str(database), *argv(value)])
                # Too long is an argument out of its range: a usage error (SPEC §10).
                if over and (result.exit_code != 2 or "characters long" not in result.stderr):
                    problems.append(f"cli {where}: exit {result.exit_code} {result.output[:120]}")
                if "unexpected error" in result.output or "characters long" in (
                    "" if over else result.output
                ):
                    problems.append(f"cli {where}: {result.output[:120]}")
                tool, arguments = mcp_call(value)
                answer = await client.call_tool(tool, arguments)
                message = _text(answer)
                if over and not answer.is_error:
                    problems.append(f"mcp {where}: accepted")
                if not over and ("at most" in message or "characters long" in message):
                    problems.append(f"mcp {where}: refused for length: {message[:120]}")
    graph.close()
    assert problems == []
    assert (vault / "a.md").read_bytes() == before  # every edit above was refused


def test_a_100_kb_seed_is_one_line_on_a_store_with_code_files(tmp_path: Path) -> None:
    """A seed is matched against file paths with LIKE; SQLite refuses a pattern over 50 KB
    ("LIKE or GLOB pattern too complex"), which reached the CLI as an unexpected error."""
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    database = tmp_path / "g.db"
    with ContextGraph.open(database) as graph:
        graph.sync([vault])
        with pytest.raises(InvalidArgument):
            graph.expand(["x" * 100_000])
    result = CliRunner().invoke(cli, ["--db", str(database), "expand", "x" * 100_000])
    assert result.exit_code == 2  # a usage error, as click reports one: its one "Error:" line
    assert "unexpected" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [
        "Error: Invalid value for 'SEEDS...': 100000 characters long; at most 1000 are taken"
    ]
