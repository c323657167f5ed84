"""The MCP door: a stdio server whose tools call the ``ContextGraph`` facade and nothing else.

The tools are plain functions: the SDK runs a synchronous tool on a worker thread, so the blocking
library never stalls the event loop. Each tool returns the library's ``as_dict()`` JSON (what the
CLI prints with ``--json``) as structured content. Every failure comes back as a tool error
(``isError``) with one line of text; nothing is printed to stdout but protocol messages (the SDK's
stdio transport points fd 1 at stderr while it serves, and logging goes to stderr).
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from contextgraph import __version__
from contextgraph.api import ContextGraph, default_database
from contextgraph.errors import ContextGraphError
from contextgraph.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

INSTRUCTIONS = """\
contextgraph is a knowledge graph over the user's markdown notes ([[WikiLinks]] name concepts) and
source code (files, classes, functions, imports), kept in one local SQLite file.
Typical use: search_memories to find notes by words; build_context to see which concepts belong
with a concept and in which notes; read_memory to read a note by its memory:// URI; expand to pull
in the code and concepts a set of entities depends on; visualize for a Mermaid diagram; sync after
files changed (or to add a folder)."""

_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# read_memory stamps the note's lastAccessed (a ranking hint) and changes nothing the user wrote,
# so it is announced as read-only too: a client need not ask before every read.
_READS_NOTE = _READ_ONLY
_SYNC = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class VisualizeResult(TypedDict):
    """The structured result of the ``visualize`` tool."""

    concept: str
    mermaid: str


def create_server(database: str | None = None) -> MCPServer:
    """Build the contextgraph MCP server on ``database`` (default: ``api.default_database()``)."""
    graph = _LazyGraph(database if database is not None else default_database())

    @asynccontextmanager
    async def lifespan(_server: MCPServer[None]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            graph.close()

    server = _Server(
        "contextgraph",
        title="contextgraph",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
    )

    def build_context(
        concept_name: Annotated[
            str,
            Field(
                min_length=1,
                max_length=1000,
                description="The concept, in plain words or as a [[WikiLink]] target.",
            ),
        ],
        depth: Annotated[
            int, Field(ge=0, le=5, description="Hops of expansion beyond direct relations.")
        ] = 2,
        max_entities: Annotated[
            int, Field(ge=1, le=100, description="Most relations listed per list.")
        ] = 20,
        include_content: Annotated[
            bool, Field(description="Add a short text preview of each source note.")
        ] = False,
    ) -> dict[str, Any]:
        """Find what belongs with a concept in the user's notes: related concepts, ranked.

        Use this first when the user asks about a topic, project, person or technology, to learn
        which other concepts are connected to it and in which notes. Concepts are the targets of
        [[WikiLinks]]; the name is normalised, so "Machine Learning", "machine_learning" and
        "[[Machine Learning|ML]]" are the same concept. An unknown concept gives empty lists, not
        an error: try search_memories then.

        Parameters: concept_name (required); depth 0-5 (default 2): how many hops to expand past
        the direct relations (0 = direct only); max_entities 1-100 (default 20): the most
        relations per list; include_content (default false): add a text preview per note.

        Returns conceptName (normalised), depth, communityId, and three lists:
        directRelations (name, coOccurrenceCount, decayWeight, weightedScore, files as memory://
        URIs, communityId, and contentPreview {uri: text} with include_content), ranked by
        weightedScore = co-occurrence x recency; expandedRelations (name, depth, via,
        coOccurrenceCount, weightedScore, communityId): concepts reached through a neighbour;
        communitySiblings (name, communityId, sharedNeighborCount, normalizedOverlap): concepts in
        the same community that share many neighbours without being linked directly.
        Read the notes behind a relation with read_memory(<uri from files>).

        Examples: build_context("Machine Learning"); build_context("PostgreSQL", depth=1,
        max_entities=10); build_context("Kafka", include_content=true).
        """
        return graph.call(
            lambda g: g.build_context(
                concept_name,
                depth=depth,
                max_entities=max_entities,
                include_content=include_content,
            ).as_dict()
        )

    def expand(
        seeds: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=1000)]],
            Field(
                min_length=1,
                max_length=100,
                description="Entity names: classes, functions, file paths or concepts.",
            ),
        ],
        max_depth: Annotated[int, Field(ge=1, le=5, description="Most hops from a seed.")] = 2,
        max_nodes: Annotated[int, Field(ge=1, le=500, description="Most entities returned.")] = 20,
    ) -> dict[str, Any]:
        """Expand a few known entities into what they depend on and what depends on them.

        Use this after you already hold some relevant entities (for example from search results
        or code you are reading) and need the surrounding code and concepts: the classes a class
        references, the modules a file imports, the concepts a concept co-occurs with. Seeds are
        matched by name: a class or function name ("AuthenticationService"), a qualified name, a
        source-relative file path ("auth/service.py"), or a concept name. Weak, generic or very
        common neighbours are filtered out.

        Parameters: seeds, 1-100 names (required); max_depth 1-5 (default 2): breadth-first hops
        from the seeds; max_nodes 1-500 (default 20): the most results.

        Returns seeds (as given), matchedSeeds (the seeds that named an entity; empty means none
        matched), and results: a list of {entity, kind ("symbol", "file" or "concept"),
        relationshipType (e.g. "imports", "references", "co-occurs"), depth, score, via (the
        entity it was reached from), path (source-relative file; not for concepts)}.

        Examples: expand(["AuthenticationService"]); expand(["TokenValidator", "auth/tokens.py"],
        max_depth=1); expand(["Raft"], max_nodes=10).
        """
        return graph.call(
            lambda g: g.expand(seeds, max_depth=max_depth, max_nodes=max_nodes).as_dict()
        )

    def sync(
        paths: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=4096)]],
            Field(
                max_length=100,
                description="Folders to sync; a new folder becomes a source. Empty = all sources.",
            ),
        ] = [],  # noqa: B006  (pydantic validates a fresh copy for every call)
        name: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Source name for a single new folder (default: the folder's name).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Bring the graph up to date with the files on disk, or add a folder to it.

        Use this when notes or code changed since the last sync (results look stale, a note you
        expect is missing), or when the user asks to add a folder. With no paths, every
        registered source is re-synced; only changed files are re-read, so this is cheap to repeat.
        A path not seen before is registered as a new source, named after its folder unless
        `name` is given. Give absolute paths: relative ones are resolved against the server's
        working directory. If another process is syncing, this waits for it to finish.

        Parameters: paths, folder paths (default []: all registered sources); name: the source
        name for one new folder (its notes get URIs memory://<name>/<relative path>).

        Returns sources (names synced), files {scanned, added, updated, unchanged, deleted,
        renamed, failed}, failed and warnings (lists of {source, path, reason}), droppedLinks,
        concepts, relations, entities, codeRelations, communities, modularity, and seconds
        (timings per phase).

        Examples: sync(); sync(["/home/me/notes"]); sync(["/home/me/src/app"], name="app").
        """

        def run(g: ContextGraph) -> dict[str, Any]:
            if not paths and not g.sources():
                raise ToolError("no sources registered: give a folder path to sync")
            return g.sync(paths, name=name, wait=True).as_dict()

        return graph.call(run)

    def search_memories(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=2000,
                description='Words (all must match) and/or "quoted phrases".',
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=100, description="Hits per page.")] = 10,
        page: Annotated[int, Field(ge=1, description="Page number, from 1.")] = 1,
        source: Annotated[
            str | None, Field(max_length=200, description="Only this source (by name).")
        ] = None,
        folder: Annotated[
            str | None,
            Field(max_length=4096, description="Only files under this source-relative folder."),
        ] = None,
    ) -> dict[str, Any]:
        """Full-text search over the user's notes and code, best matches first.

        Use this to find notes by their words when you do not know a concept name, or when
        build_context returns nothing. Plain words are all required (AND); put a phrase in
        double quotes to match it exactly. Operator characters are treated as text, so any input
        is safe. Ranking is bm25 relevance times recency, so recent and recently read notes rank
        higher. Page through with page=2, 3, ... while total says there are more.

        Parameters: query (required); limit 1-100 (default 10); page >= 1 (default 1); source:
        only files of this source; folder: only files under this folder of a source (e.g.
        "engineering/ml").

        Returns query, total (all matches), page, limit, and hits: a list of {uri (memory://...),
        path, source, title, snippet (matched words in [brackets]), score, bm25, decayWeight}.
        Read a hit in full with read_memory(hit.uri).

        Examples: search_memories("kafka consumer lag"); search_memories('"leader election"');
        search_memories("migration", folder="engineering/databases", limit=5).
        """
        return graph.call(
            lambda g: g.search(
                query, limit=limit, page=page, source=source, folder=folder
            ).as_dict()
        )

    def read_memory(
        identifier: Annotated[
            str,
            Field(
                min_length=1,
                max_length=4096,
                description="A memory:// URI, a source-relative path, or a note title.",
            ),
        ],
    ) -> dict[str, Any]:
        """Read one note or code file in full.

        Use this to read a note found through search_memories (hit.uri) or build_context (a
        relation's files). The identifier is best a memory://<source>/<path> URI exactly as
        returned by the other tools; a path relative to a source root or a note's title also
        work. Only files inside the registered sources can be read: paths with "..", absolute
        paths and links that lead outside are refused. Reading a note marks it as recently used,
        which raises it in later rankings.

        Parameters: identifier (required).

        Returns uri, path, source, title, content (the full text, frontmatter included), created,
        modified, lastAccessed (ISO 8601 times), and concepts (the concepts the note links to).

        Examples: read_memory("memory://vault/notes/x.md");
        read_memory("memory://vault/engineering/distributed-systems/kafka.md");
        read_memory("Kafka").
        """
        return graph.call(lambda g: g.read(identifier).as_dict())

    def visualize(
        concept_name: Annotated[
            str,
            Field(min_length=1, max_length=1000, description="The concept at the centre."),
        ],
        depth: Annotated[int, Field(ge=1, le=5, description="Hops from the concept.")] = 2,
        max_nodes: Annotated[int, Field(ge=5, le=100, description="Most concepts drawn.")] = 30,
    ) -> Annotated[CallToolResult, VisualizeResult]:
        """Draw a concept's neighbourhood as a Mermaid flowchart.

        Use this when the user wants to see how concepts connect, or asks for a diagram or map.
        The strongest relations are drawn first; edge labels are co-occurrence counts; each
        community is a subgraph; the concept itself is highlighted. Show the text to the user in
        a ```mermaid block. For the data itself (scores, notes), use build_context instead.

        Parameters: concept_name (required); depth 1-5 (default 2); max_nodes 5-100 (default 30).

        Returns concept (as given) and mermaid (the flowchart source, starting with "flowchart");
        the text content is the flowchart itself. An unknown concept gives a one-node diagram.

        Examples: visualize("Machine Learning"); visualize("Raft", depth=1, max_nodes=15).
        """
        mermaid = graph.call(lambda g: g.visualize(concept_name, depth=depth, max_nodes=max_nodes))
        return CallToolResult(
            content=[TextContent(type="text", text=mermaid)],
            structured_content={"concept": concept_name, "mermaid": mermaid},
        )

    for fn, hints in (
        (build_context, _READ_ONLY),
        (expand, _READ_ONLY),
        (sync, _SYNC),
        (search_memories, _READ_ONLY),
        (read_memory, _READS_NOTE),
        (visualize, _READ_ONLY),
    ):
        # cleandoc: the description is what the model reads, without the source's indentation.
        server.add_tool(
            fn,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=hints,
            structured_output=True,
        )
    return server


def serve(database: str) -> None:
    """Run the MCP server on stdio until the client disconnects."""
    # Configured before the server so the SDK's own logging set-up finds handlers and stays out.
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    create_server(database).run("stdio")


class _LazyGraph:
    """One ``ContextGraph`` per server: opened by the first tool call, closed when serving ends."""

    def __init__(self, database: str) -> None:
        self._database = database
        self._graph: ContextGraph | None = None
        self._lock = threading.Lock()  # tool calls run on worker threads

    def _get(self) -> ContextGraph:
        with self._lock:
            if self._graph is None:
                self._graph = ContextGraph.open(self._database, settings=Settings.from_env())
            return self._graph

    def close(self) -> None:
        with self._lock:
            if self._graph is not None:
                self._graph.close()
                self._graph = None

    def call(self, action: Callable[[ContextGraph], T]) -> T:
        """Run ``action`` on the graph, turning every failure into a one-line ``ToolError``."""
        try:
            return action(self._get())
        except ToolError:
            raise
        except ContextGraphError as exc:
            raise ToolError(_one_line(str(exc)) or type(exc).__name__) from exc
        except Exception as exc:
            log.exception("unexpected error in a contextgraph tool")
            detail = _one_line(str(exc), limit=200)
            message = f"unexpected error: {type(exc).__name__}" + (f": {detail}" if detail else "")
            raise ToolError(message) from exc


class _Server(MCPServer[None]):
    """An ``MCPServer`` whose argument-validation errors read as one line."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[None, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # pydantic's own text spans several lines and links to its docs; keep field + reason.
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
                for err in cause.errors()
            )
            raise ToolError(
                f"Error executing tool {name}: invalid arguments: {problems}"
            ) from cause


def _one_line(text: str, *, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
