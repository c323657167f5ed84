"""The MCP tools: one small module-level function per tool, and the list that registers them.

Each tool takes the SDK's ``Context`` (to reach :class:`ServerState`, which the server's lifespan
provides), calls one ``ContextGraph`` method and returns its ``as_dict()`` JSON — what the CLI
prints with ``--json`` — as structured content checked against the output schema in
:mod:`contextgraph.mcp_schemas`. The docstrings are what the model reads. Adding a tool is one
such function plus one line in ``mcp_server.TOOLS``, which does the wiring; the tools that write
notes live in :mod:`contextgraph.mcp_write_tools`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar

import pydantic_core
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from contextgraph import limits
from contextgraph.api import ContextGraph
from contextgraph.errors import ContextGraphError
from contextgraph.mcp_schemas import (
    ContextResult,
    ExpandResult,
    NoteResult,
    RetrieveResult,
    SearchResult,
    SyncResult,
    VisualizeResult,
)
from contextgraph.settings import Settings
from contextgraph.store import db

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ServerState:
    """The server's state: one ``ContextGraph``, opened by the first tool call, and the policy."""

    database: str
    read_only: bool = False
    allow: tuple[str, ...] | None = None
    _graph: ContextGraph | None = None
    _file: tuple[Path, int, int] | None = None  # the database file opened: path, device, inode
    _gone: str | None = None  # "replaced" or "removed" once that file is no longer there
    _lock: threading.Lock = field(default_factory=threading.Lock)  # tools run on worker threads

    def get(self) -> ContextGraph:
        with self._lock:
            if self._file is not None:
                self._check_file(*self._file)
            if self._graph is None:
                # A read-only server writes nothing, a new database file included.
                self._graph = ContextGraph.open(
                    self.database, settings=Settings.from_env(), create=not self.read_only
                )
                path = self._graph.database_path
                if path is not None:
                    self._file = db.file_identity(path)
            return self._graph

    def _check_file(self, path: Path, device: int, inode: int) -> None:
        """Refuse every call, in one line, once the database file was replaced or removed: the
        server kept answering from the old file, and its writes went into a file nobody would
        read again. Nor does it open the new file: a ``-wal`` the old file left behind would be
        read as the new one's (SQLite ties the log to the file's name, not to the file)."""
        if self._gone is None:
            self._gone = db.gone_from((path, device, inode))
            if self._gone is None:
                return
            log.warning("the database file %s was %s while the server ran", path, self._gone)
        raise ToolError(
            f"the database file {path} was {self._gone} while this server ran: restart the "
            "server to use the one there now"
        )

    def close(self) -> None:
        with self._lock:
            if self._graph is not None:
                self._graph.close()
                self._graph = None

    def call(self, action: Callable[[ContextGraph], T]) -> T:
        """Run ``action`` on the graph, turning every failure into a one-line ``ToolError``."""
        try:
            return action(self.get())
        except ToolError:
            raise
        except ContextGraphError as exc:
            raise ToolError(one_line(str(exc)) or type(exc).__name__) from exc
        except Exception as exc:
            log.exception("unexpected error in a contextgraph tool")
            # The driver's own words, not SQLAlchemy's text of the statement and its parameters.
            detail = one_line(str(getattr(exc, "orig", None) or exc), limit=200)
            message = f"unexpected error: {type(exc).__name__}" + (f": {detail}" if detail else "")
            raise ToolError(message) from exc


def state(ctx: Context) -> ServerState:
    """The state of the server running this call."""
    found = ctx.request_context.lifespan_context
    assert isinstance(found, ServerState), type(found)
    return found


def structured(data: dict[str, Any], text: str | None = None) -> CallToolResult:
    """A result whose structured content is ``data`` exactly (and whose text is its JSON)."""
    if text is None:
        text = pydantic_core.to_json(data, indent=2).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


class _Result(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


def answer(ctx: Context, action: Callable[[ContextGraph], _Result]) -> CallToolResult:
    """Run ``action`` on the graph (as :meth:`ServerState.call` does); the result it returns,
    as a dict, is the tool's structured result."""
    return structured(state(ctx).call(lambda g: action(g).as_dict()))


def bounded(bound: limits.Bound, description: str) -> Any:
    return Field(ge=bound.low, le=bound.high, description=description)


# Argument types several tools share, each bound written once; a use adds its own description
# (``Annotated[Query, Field(description=...)]``: pydantic merges the two fields).
Query = Annotated[str, Field(min_length=1, max_length=limits.MAX_QUERY_CHARS)]
# A search of no words finds nothing, as the library and the CLI answer it (not an error).
SearchQuery = Annotated[str, Field(max_length=limits.MAX_QUERY_CHARS)]
EntityName = Annotated[str, Field(min_length=1, max_length=limits.NAME.high)]
PathText = Annotated[str, Field(min_length=1, max_length=limits.MAX_PATH_CHARS)]
SourceName = Annotated[str | None, Field(min_length=1, max_length=limits.SOURCE_NAME.high)]
SourceFilter = Annotated[
    str | None,
    Field(max_length=limits.SOURCE_NAME.high, description="Only this source (by name)."),
]


# -- reading tools ---------------------------------------------------------------------------


def build_context(
    ctx: Context,
    concept_name: Annotated[
        EntityName, Field(description="The concept, in plain words or as a [[WikiLink]] target.")
    ],
    depth: Annotated[
        int | None, bounded(limits.CONTEXT_DEPTH, "Hops of expansion beyond direct relations.")
    ] = None,
    max_entities: Annotated[
        int | None, bounded(limits.CONTEXT_MAX_ENTITIES, "Most relations listed per list.")
    ] = None,
    include_content: Annotated[
        bool, Field(description="Add a short text preview of each source note.")
    ] = False,
) -> Annotated[CallToolResult, ContextResult]:
    """Find what belongs with a concept in the user's notes: related concepts, ranked.

    Use this first when the user asks about a topic, project, person or technology, to learn
    which other concepts are connected to it and in which notes. Concepts are the targets of
    [[WikiLinks]]; the name is normalised, so "Machine Learning", "machine_learning" and
    "[[Machine Learning|ML]]" are the same concept. An unknown concept gives empty lists, not
    an error: try search_memories then.

    Parameters: concept_name (required); depth 0-5 (default: the server's setting, 2 unless
    CONTEXTGRAPH_DEPTH says otherwise): how many hops to expand past the direct relations
    (0 = direct only); max_entities 1-100 (default: the setting, normally 20): the most
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
    return answer(
        ctx,
        lambda g: g.build_context(
            concept_name,
            depth=depth,
            max_entities=max_entities,
            include_content=include_content,
        ),
    )


def expand(
    ctx: Context,
    seeds: Annotated[
        list[EntityName],
        Field(
            min_length=1,
            max_length=limits.EXPAND_MAX_SEEDS,
            description="Entity names: classes, functions, file paths or concepts.",
        ),
    ],
    max_depth: Annotated[
        int | None, bounded(limits.EXPAND_MAX_DEPTH, "Most hops from a seed.")
    ] = None,
    max_nodes: Annotated[
        int | None, bounded(limits.EXPAND_MAX_NODES, "Most entities returned.")
    ] = None,
    direction: Annotated[
        Literal["both", "out", "in"],
        Field(description="out: what the seeds use; in: what uses them; both (default)."),
    ] = "both",
) -> Annotated[CallToolResult, ExpandResult]:
    """Expand a few known entities into what they depend on and what depends on them.

    Use this after you already hold some relevant entities (for example from search results
    or code you are reading) and need the surrounding code and concepts: the classes a class
    references, the modules a file imports, the concepts a concept co-occurs with. Seeds are
    matched by name: a class or function name ("AuthenticationService"), a qualified name, a
    source-relative file path ("auth/service.py"), or a concept name. Weak, generic or very
    common neighbours are filtered out.

    Parameters: seeds, 1-100 names (required); max_depth 1-5 (default: the server's setting,
    normally 2): breadth-first hops from the seeds; max_nodes 1-500 (default: the setting,
    normally 20): the most results; direction "out" (only what the seeds import, inherit or
    reference), "in" (only what uses them) or "both".

    Returns seeds (as given), matchedSeeds (the seeds that named an entity; empty means none
    matched), and results: a list of {entity, kind ("symbol", "file" or "concept"),
    relationshipType (e.g. "imports", "references", "co_occurs"), depth, score, via (the
    entity it was reached from), path (source-relative file; not for concepts), uri (its
    memory:// URI, for read_memory)}. Within a depth, files a seed imports or is imported by
    come before the symbols a file merely defines.

    Examples: expand(["AuthenticationService"]); expand(["TokenValidator", "auth/tokens.py"],
    max_depth=1); expand(["Raft"], max_nodes=10).
    """
    return answer(
        ctx,
        lambda g: g.expand(seeds, max_depth=max_depth, max_nodes=max_nodes, direction=direction),
    )


def sync(
    ctx: Context,
    paths: Annotated[
        list[PathText],
        Field(
            max_length=limits.SYNC_MAX_PATHS,
            description="Folders to sync; a new folder becomes a source. Empty = all sources.",
        ),
    ] = [],  # noqa: B006  (pydantic validates a fresh copy for every call)
    name: Annotated[
        SourceName,
        Field(description="Source name for a single new folder (default: the folder's name)."),
    ] = None,
) -> Annotated[CallToolResult, SyncResult]:
    """Bring the graph up to date with the files on disk, or add a folder to it.

    Use this when notes or code changed since the last sync (results look stale, a note you
    expect is missing), or when the user asks to add a folder. With no paths, every
    registered source is re-synced; only changed files are re-read, so this is cheap to repeat.
    A path not seen before is registered as a new source, named after its folder unless
    `name` is given — unless the server was started read-only (then only registered sources
    sync) or with allowed folders (then only folders inside them may be added). Give absolute
    paths: relative ones are resolved against the server's working directory. If another
    process is syncing, this waits for it to finish. Notes changed through write_note and
    the other write tools are synced already.

    Parameters: paths, folder paths (default []: all registered sources); name: the source
    name for one new folder (its notes get URIs memory://<name>/<relative path>).

    Returns sources (names synced), files {scanned, added, updated, unchanged, deleted,
    renamed, failed}, failed and warnings (lists of {source, path, reason}), droppedLinks,
    concepts, relations, entities, codeRelations, communities, modularity, and seconds
    (timings per phase).

    Examples: sync(); sync(["/home/me/notes"]); sync(["/home/me/src/app"], name="app").
    """
    current = state(ctx)

    def run(g: ContextGraph) -> dict[str, Any]:
        if not paths and not g.sources():
            raise ToolError("no sources registered: give a folder path to sync")
        report = g.sync(
            paths, name=name, wait=True, register=not current.read_only, allow=current.allow
        )
        return report.as_dict()

    return structured(current.call(run))


def search_memories(
    ctx: Context,
    query: Annotated[SearchQuery, Field(description='Words and/or "quoted phrases".')],
    limit: Annotated[int | None, bounded(limits.SEARCH_LIMIT, "Hits per page.")] = None,
    page: Annotated[int, bounded(limits.SEARCH_PAGE, "Page number, from 1.")] = 1,
    source: SourceFilter = None,
    folder: Annotated[
        str | None,
        Field(
            max_length=limits.MAX_PATH_CHARS,
            description="Only files under this source-relative folder.",
        ),
    ] = None,
    all_words: Annotated[
        bool, Field(description="Require every word (default: any word matches).")
    ] = False,
) -> Annotated[CallToolResult, SearchResult]:
    """Full-text search over the user's notes and code, best matches first.

    Use this to find notes by their words when you do not know a concept name, or when
    build_context returns nothing. Any of the words matches (files with more of them, and
    rarer ones, rank first; common English words are ignored); all_words=true requires every
    word. Identifiers match by their parts: "token validator" finds TokenValidator and
    token_validator. Put a phrase in double quotes to match it exactly.
    Operator characters are treated as text, so any input is safe. Ranking is bm25 relevance
    times recency, so recent and recently read notes rank higher. Page through with page=2,
    3, ... while total says there are more.

    Parameters: query (required); limit 1-100 (default: the server's setting, normally 10);
    page 1-1000000 (default 1);
    all_words (default false);
    source: only files of this source; folder: only files under this folder of a source
    (e.g. "engineering/ml").

    Returns query, total (all matches), page, limit, and hits: a list of {uri (memory://...),
    path, source, title, snippet (matched words marked), score, bm25, decayWeight}.
    Read a hit in full with read_memory(hit.uri).

    Examples: search_memories("kafka consumer lag"); search_memories('"leader election"');
    search_memories("migration", folder="engineering/databases", limit=5).
    """
    return answer(
        ctx,
        lambda g: g.search(
            query, limit=limit, page=page, source=source, folder=folder, all_words=all_words
        ),
    )


def retrieve(
    ctx: Context,
    query: Annotated[
        Query,
        Field(description="A question or task in plain words, e.g. a bug report or commit title."),
    ],
    k: Annotated[int | None, bounded(limits.RETRIEVE_K, "Files and notes to return.")] = None,
    budget_tokens: Annotated[
        int | None,
        bounded(limits.RETRIEVE_BUDGET_TOKENS, "Most tokens of excerpts (characters / 4)."),
    ] = None,
    source: SourceFilter = None,
) -> Annotated[CallToolResult, RetrieveResult]:
    """Find the files and notes a question needs: the best first tool for a coding question.

    Give it the question or task as you would ask a colleague ("how does
    AuthenticationService validate tokens?", "fix: guard ChatGPT import against missing
    create_time"). It matches the words against file paths, symbol names, note titles and
    text, then adds what the best matches are connected to — the files they import or are
    imported by, the code their symbols use, the notes that link the same concepts — and
    ranks everything by one score. Widely shared hubs (a logger every file imports) are
    down-weighted. It never changes anything.

    Parameters: query (required); k 1-50 (default: the server's setting, normally 10): how
    many files and notes; budget_tokens 100-100000 (default: the setting, normally 6000):
    excerpts stop once they would pass this many
    tokens (estimated as characters / 4; the first item always keeps one, cut to fit);
    source: only files of this source.

    Returns query, k, budgetTokens, tokens (used by the excerpts), truncated (whether an
    excerpt was cut or left out), and items: a list of {rank, uri, path, source, kind ("code"
    or "note"), score, why (reasons: matched words, or a graph path such as "imported by
    rich/console.py"), excerpt (for code the most relevant symbols' signatures and docstrings;
    for notes the matching paragraphs)}. Read an item in full with read_memory(item.uri), or
    widen around a code file with expand([item.path]).

    Examples: retrieve("how does AuthenticationService validate tokens");
    retrieve("rate limiting for the public API", k=5, budget_tokens=2000).
    """
    return answer(ctx, lambda g: g.retrieve(query, k=k, budget_tokens=budget_tokens, source=source))


def read_memory(
    ctx: Context,
    identifier: Annotated[
        PathText, Field(description="A memory:// URI, a source-relative path, or a note title.")
    ],
) -> Annotated[CallToolResult, NoteResult]:
    """Read one note or code file in full.

    Use this to read a note found through search_memories (hit.uri) or build_context (a
    relation's files). The identifier is best a memory://<source>/<path> URI exactly as
    returned by the other tools; a path relative to a source root or a note's title also
    work. Only files inside the registered sources can be read: paths with "..", absolute
    paths and links that lead outside are refused. Reading a note records the read (it marks
    the note as recently used, which raises it in later rankings); it changes no file.

    Parameters: identifier (required).

    Returns uri, path, source, title, content (the full text, frontmatter included), created,
    modified, lastAccessed (ISO 8601 times), concepts (the concepts the note links to), and
    hash (pass it as expected_hash to edit_note or write_note so that you never overwrite a
    change made since you read the note).

    Examples: read_memory("memory://vault/notes/x.md");
    read_memory("memory://vault/engineering/distributed-systems/kafka.md");
    read_memory("Kafka").
    """
    return answer(ctx, lambda g: g.read(identifier))


def visualize(
    ctx: Context,
    concept_name: Annotated[EntityName, Field(description="The concept at the centre.")],
    depth: Annotated[int | None, bounded(limits.VISUALIZE_DEPTH, "Hops from the concept.")] = None,
    max_nodes: Annotated[
        int | None, bounded(limits.VISUALIZE_MAX_NODES, "Most concepts drawn.")
    ] = None,
) -> Annotated[CallToolResult, VisualizeResult]:
    """Draw a concept's neighbourhood as a Mermaid flowchart.

    Use this when the user wants to see how concepts connect, or asks for a diagram or map.
    The strongest relations are drawn first; edge labels are co-occurrence counts; each
    community is a subgraph; the concept itself is highlighted. Show the text to the user in
    a ```mermaid block. For the data itself (scores, notes), use build_context instead.

    Parameters: concept_name (required); depth 1-5 (default: the server's setting, normally 2);
    max_nodes 5-100 (default: the setting, normally 30).

    Returns concept (as given) and mermaid (the flowchart source, starting with "flowchart");
    the text content is the flowchart itself. An unknown concept gives a one-node diagram.

    Examples: visualize("Machine Learning"); visualize("Raft", depth=1, max_nodes=15).
    """
    mermaid = state(ctx).call(lambda g: g.visualize(concept_name, depth=depth, max_nodes=max_nodes))
    return structured({"concept": concept_name, "mermaid": mermaid}, text=mermaid)


# -- annotations ------------------------------------------------------------------------------

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# A read changes no file but records the read (lastAccessed, a ranking input): not read-only.
RECORDS_READ = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
SYNC = RECORDS_READ  # derived state only; repeating it changes nothing more
CREATES = ToolAnnotations(  # may replace a note (overwrite)
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
CHANGES = CREATES  # replace_text/replace_section drop text; append twice appends twice
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def one_line(text: str, *, limit: int = 500) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
