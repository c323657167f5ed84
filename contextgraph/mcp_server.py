"""The MCP door: a stdio server whose tools call the ``ContextGraph`` facade and nothing else.

The tools themselves are the module-level functions of :mod:`contextgraph.mcp_tools`; this
module registers them (each with arguments exactly its parameters: an unknown one is an error),
provides their :class:`~contextgraph.mcp_tools.ServerState` through the lifespan, and runs the
watcher beside the server with ``--watch``. The SDK runs the synchronous tools on worker
threads, so the blocking library never stalls the event loop.

Every failure comes back as a tool error (``isError``) with one line of text: library errors
through :meth:`ServerState.call`, argument errors through the :class:`_OneLineArgumentErrors`
middleware (the SDK's hook for wrapping requests; no subclass of its server). Nothing is printed
to stdout but protocol messages (the SDK's stdio transport points fd 1 at stderr while it
serves, and logging goes to stderr).
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import types
import typing
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, ValidationError

from contextgraph import __version__
from contextgraph.api import ContextGraph
from contextgraph.background import on_thread, start_refresher
from contextgraph.errors import ContextGraphError, InvalidArgument
from contextgraph.launch import default_database
from contextgraph.mcp_tools import (
    CHANGES,
    CREATES,
    DELETES,
    READ_ONLY,
    RECORDS_READ,
    SYNC,
    ServerState,
    build_context,
    expand,
    one_line,
    read_memory,
    retrieve,
    search_memories,
    sync,
    visualize,
)
from contextgraph.mcp_write_tools import delete_note, edit_note, move_note, write_note
from contextgraph.settings import Settings
from contextgraph.store import db

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
contextgraph is a knowledge graph over the user's markdown notes ([[WikiLinks]] name concepts) and
source code (files, classes, functions, imports), kept in one local SQLite file.
Typical use: retrieve with the user's question to get the files and notes it needs, ranked, with
reasons and excerpts; search_memories to find notes by words; build_context to see which concepts
belong with a concept and in which notes; read_memory to read a note by its memory:// URI;
expand to pull in the code and concepts a set of entities depends on; visualize for a Mermaid
diagram; sync after files changed (or to add a folder). Unless the server is read-only,
write_note, edit_note, move_note and delete_note change the notes themselves (plain markdown
files); the graph follows at once."""

# (function, annotations, writes files): the one list a new tool joins.
TOOLS: tuple[tuple[Callable[..., CallToolResult], ToolAnnotations, bool], ...] = (
    (build_context, READ_ONLY, False),
    (expand, READ_ONLY, False),
    (sync, SYNC, False),
    (search_memories, READ_ONLY, False),
    (retrieve, READ_ONLY, False),
    (read_memory, RECORDS_READ, False),
    (visualize, READ_ONLY, False),
    (write_note, CREATES, True),
    (edit_note, CHANGES, True),
    (move_note, CHANGES, True),  # the old path is gone (never a file's content)
    (delete_note, DELETES, True),
)


def make_tool(fn: Callable[..., Any], annotations: ToolAnnotations) -> Tool:
    """An SDK tool for ``fn`` whose arguments are exactly its parameters (no unknown ones)."""
    # cleandoc: the description is what the model reads, without the source's indentation.
    tool = Tool.from_function(
        fn,
        description=inspect.cleandoc(fn.__doc__ or ""),
        annotations=annotations,
        structured_output=True,
    )
    meta = tool.fn_metadata
    loose = meta.arg_model
    # Strict: a value of the published JSON type only (no "5" or true for a number, no "yes"
    # or 1 for a flag such as overwrite), as the library's own bounds refuse a bool.
    config = ConfigDict(**{**loose.model_config, "extra": "forbid", "strict": True})
    strict: type[ArgModelBase] = type(
        loose.__name__, (loose,), {"model_config": config, "__module__": loose.__module__}
    )
    tool.fn_metadata = _LiteralText(
        arg_model=strict,
        output_schema=meta.output_schema,
        output_model=meta.output_model,
        wrap_output=meta.wrap_output,
    )
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


class _LiteralText(FuncMetadata):
    """The SDK's argument handling, with text arguments taken as they are written.

    The SDK parses as JSON every string argument whose annotation is not exactly ``str`` (for
    clients that send a list as ``'["a", "b"]'``), so an optional text was changed too: the
    content ``'{"port": 8080}'`` became an object and was refused, and ``find="null"`` or
    ``source="null"`` became no value at all. Fields that take text are left alone here; the
    others (lists of seeds) are parsed as before.
    """

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        fields = self.arg_model.model_fields
        text = {
            key
            for name, field in fields.items()
            if _takes_text(field.annotation)
            for key in (name, field.alias)
            if key
        }
        parsed = super().pre_parse_json({k: v for k, v in data.items() if k not in text})
        return {key: data[key] if key in text else parsed[key] for key in data}


def _takes_text(annotation: Any) -> bool:
    """Whether a field of this annotation accepts a string (``str``, ``str | None``)."""
    if annotation is str:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _takes_text(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_takes_text(arg) for arg in typing.get_args(annotation))
    return False


def create_server(
    database: str | None = None,
    *,
    read_only: bool = False,
    allow: Sequence[str] | None = None,
    watch: bool = False,
) -> MCPServer[ServerState]:
    """Build the contextgraph MCP server on ``database`` (default: ``api.default_database()``).

    ``read_only`` offers no write tool and lets ``sync`` re-sync registered sources only;
    ``allow`` lets ``sync`` register new sources only inside those folders; ``watch`` keeps
    every registered source in step with its folder while the server runs.
    """
    state = ServerState(
        database if database is not None else default_database(),
        read_only=read_only,
        allow=None if allow is None else tuple(allow),
    )
    tools = [make_tool(fn, hints) for fn, hints, writes in TOOLS if not (writes and read_only)]

    @asynccontextmanager
    async def lifespan(_server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        watcher = None
        if watch:
            try:
                watcher = _start_watcher(state.database)
            except ContextGraphError as exc:  # bad settings, a damaged or read-only file
                log.warning("the watcher did not start: %s", one_line(str(exc)))
        # The watcher refreshes the precomputed weights itself; a read-only server never writes.
        refresher = None
        if not (watch or read_only):
            try:
                refresher = start_refresher(state.database)
            except ContextGraphError as exc:  # bad settings, a damaged file: each call says so
                log.warning("the weights refresher did not start: %s", one_line(str(exc)))
        try:
            yield state
        finally:
            if watcher is not None:
                watcher()
            if refresher is not None:
                refresher()
            state.close()

    return MCPServer(
        "contextgraph",
        title="contextgraph",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        tools=tools,
        middleware=[_OneLineArgumentErrors({t.name: t for t in tools})],
    )


def _start_watcher(database: str) -> Callable[[], None]:
    """Run ``contextgraph watch`` on a thread beside the server; return what stops it."""
    from contextgraph.watch import Watcher

    if db.is_memory(db.database_url(database)):  # a second open: a second, empty database
        raise InvalidArgument("--watch needs a database file or server, not :memory:")
    stop = threading.Event()
    graph = ContextGraph.open(database, settings=Settings.from_env())
    try:
        watcher = Watcher(graph)  # refuses a database it may not write
    except ContextGraphError:
        graph.close()
        raise
    return on_thread(lambda: watcher.run(stop), "contextgraph-watch", stop, graph)


def serve(
    database: str,
    *,
    read_only: bool = False,
    allow: Sequence[str] | None = None,
    watch: bool = False,
) -> None:
    """Run the MCP server on stdio until the client disconnects."""
    # Configured before the server so the SDK's own logging set-up finds handlers and stays out.
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    create_server(database, read_only=read_only, allow=allow, watch=watch).run("stdio")


class _OneLineArgumentErrors:
    """Middleware: check a ``tools/call``'s arguments first, and word a mistake as one line.

    The SDK would report pydantic's own text, which spans several lines and links to its docs;
    the model reads better with "field: reason". Valid calls go on untouched.
    """

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = tools

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            name = params.get("name")
            tool = self._tools.get(name) if isinstance(name, str) else None
            arguments = params.get("arguments") or {}
            if tool is not None and isinstance(arguments, Mapping):
                meta = tool.fn_metadata
                try:
                    meta.arg_model.model_validate(meta.pre_parse_json(dict(arguments)))
                except ValidationError as exc:
                    problems = "; ".join(
                        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                        for err in exc.errors()
                    )
                    message = f"Error executing tool {name}: invalid arguments: {problems}"
                    return CallToolResult(
                        content=[TextContent(type="text", text=one_line(message))],
                        is_error=True,
                    )
        return await call_next(ctx)
