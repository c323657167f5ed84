"""The MCP tools: one small module-level function per tool, and the list that registers them.

Each tool takes the SDK's ``Context`` (to reach :class:`ServerState`, which the server's lifespan
provides), calls one ``ContextGraph`` method and returns its ``as_dict()`` JSON — what the CLI
prints with ``--json`` — as structured content checked against the output schema in
:mod:`contextgraph.mcp_schemas`. The docstrings are what the model reads. Adding a tool is one
such function plus one line in :data:`TOOLS`; :mod:`contextgraph.mcp_server` does the wiring.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

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
    SearchResult,
    SyncResult,
    VisualizeResult,
    WriteResult,
)
from contextgraph.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ServerState:
    """The server's state: one ``ContextGraph``, opened by the first tool call, and the policy."""

    database: str
    read_only: bool = False
    allow: tuple[str, ...] | None = None
    _graph: ContextGraph | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # tools run on worker threads

    def get(self) -> ContextGraph:
        with self._lock:
            if self._graph is None:
                self._graph = ContextGraph.open(self.database, settings=Settings.from_env())
            return self._graph

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
            detail = one_line(str(exc), limit=200)
            message = f"unexpected error: {type(exc).__name__}" + (f": {detail}" if detail else "")
            raise ToolError(message) from exc


def state(ctx: Context) -> ServerState:
    """The state of the server running this call."""
    found = ctx.request_context.lifespan_context
    assert isinstance(found, ServerState), type(found)
    return found


def _structured(data: dict[str, Any], text: str | None = None) -> CallToolResult:
    """A result whose structured content is ``data`` exactly (and whose text is its JSON)."""
    if text is None:
        text = pydantic_core.to_json(data, indent=2).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _bounded(bound: limits.Bound, description: str) -> Any:
    return Field(ge=bound.low, le=bound.high, description=description)


# -- reading tools ---------------------------------------------------------------------------


def build_context(
    ctx: Context,
    concept_name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="The concept, in plain words or as a [[WikiLink]] target.",
        ),
    ],
    depth: Annotated[
        int, _bounded(limits.CONTEXT_DEPTH, "Hops of expansion beyond direct relations.")
    ] = 2,
    max_entities: Annotated[
        int, _bounded(limits.CONTEXT_MAX_ENTITIES, "Most relations listed per list.")
    ] = 20,
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
    return _structured(
        state(ctx).call(
            lambda g: g.build_context(
                concept_name,
                depth=depth,
                max_entities=max_entities,
                include_content=include_content,
            ).as_dict()
        )
    )


def expand(
    ctx: Context,
    seeds: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=1000)]],
        Field(
            min_length=1,
            max_length=limits.EXPAND_MAX_SEEDS,
            description="Entity names: classes, functions, file paths or concepts.",
        ),
    ],
    max_depth: Annotated[int, _bounded(limits.EXPAND_MAX_DEPTH, "Most hops from a seed.")] = 2,
    max_nodes: Annotated[int, _bounded(limits.EXPAND_MAX_NODES, "Most entities returned.")] = 20,
) -> Annotated[CallToolResult, ExpandResult]:
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
    return _structured(
        state(ctx).call(
            lambda g: g.expand(seeds, max_depth=max_depth, max_nodes=max_nodes).as_dict()
        )
    )


def sync(
    ctx: Context,
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

    return _structured(current.call(run))


def search_memories(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=limits.MAX_QUERY_CHARS,
            description='Words and/or "quoted phrases".',
        ),
    ],
    limit: Annotated[int, _bounded(limits.SEARCH_LIMIT, "Hits per page.")] = 10,
    page: Annotated[int, _bounded(limits.SEARCH_PAGE, "Page number, from 1.")] = 1,
    source: Annotated[
        str | None, Field(max_length=200, description="Only this source (by name).")
    ] = None,
    folder: Annotated[
        str | None,
        Field(max_length=4096, description="Only files under this source-relative folder."),
    ] = None,
) -> Annotated[CallToolResult, SearchResult]:
    """Full-text search over the user's notes and code, best matches first.

    Use this to find notes by their words when you do not know a concept name, or when
    build_context returns nothing. Put a phrase in double quotes to match it exactly.
    Operator characters are treated as text, so any input is safe. Ranking is bm25 relevance
    times recency, so recent and recently read notes rank higher. Page through with page=2,
    3, ... while total says there are more.

    Parameters: query (required); limit 1-100 (default 10); page 1-1000000 (default 1);
    source: only files of this source; folder: only files under this folder of a source
    (e.g. "engineering/ml").

    Returns query, total (all matches), page, limit, and hits: a list of {uri (memory://...),
    path, source, title, snippet (matched words marked), score, bm25, decayWeight}.
    Read a hit in full with read_memory(hit.uri).

    Examples: search_memories("kafka consumer lag"); search_memories('"leader election"');
    search_memories("migration", folder="engineering/databases", limit=5).
    """
    return _structured(
        state(ctx).call(
            lambda g: g.search(
                query, limit=limit, page=page, source=source, folder=folder
            ).as_dict()
        )
    )


def read_memory(
    ctx: Context,
    identifier: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="A memory:// URI, a source-relative path, or a note title.",
        ),
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
    return _structured(state(ctx).call(lambda g: g.read(identifier).as_dict()))


def visualize(
    ctx: Context,
    concept_name: Annotated[
        str,
        Field(min_length=1, max_length=1000, description="The concept at the centre."),
    ],
    depth: Annotated[int, _bounded(limits.VISUALIZE_DEPTH, "Hops from the concept.")] = 2,
    max_nodes: Annotated[int, _bounded(limits.VISUALIZE_MAX_NODES, "Most concepts drawn.")] = 30,
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
    mermaid = state(ctx).call(lambda g: g.visualize(concept_name, depth=depth, max_nodes=max_nodes))
    return _structured({"concept": concept_name, "mermaid": mermaid}, text=mermaid)


# -- writing tools ---------------------------------------------------------------------------

_Hash = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=128,
        description="The hash read_memory (or a write) returned: refuse if the note changed.",
    ),
]
_Identifier = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4096,
        description="The note: a memory:// URI, a source-relative path, or its title.",
    ),
]
_Text = Annotated[str, Field(max_length=10 * 1024 * 1024)]


def write_note(
    ctx: Context,
    path_or_title: Annotated[
        str,
        Field(
            min_length=1,
            max_length=limits.MAX_PATH_CHARS,
            description="A title, a source-relative path ending in .md, or a memory:// URI.",
        ),
    ],
    content: Annotated[_Text, Field(description="The whole markdown text of the note.")],
    source: Annotated[
        str | None,
        Field(min_length=1, max_length=200, description="The source to write into."),
    ] = None,
    overwrite: Annotated[
        bool, Field(description="Replace the note if it exists (default: refuse).")
    ] = False,
    expected_hash: _Hash = None,
) -> Annotated[CallToolResult, WriteResult]:
    """Create a markdown note in the user's notes folder (or, with overwrite, replace one).

    Use this to remember something for later: a decision, a summary, facts about a person or
    project. Link the concepts the note is about as [[WikiLinks]] ("We moved [[Billing]] to
    [[PostgreSQL]]"): they become concepts in the graph, related to each other, as soon as
    this returns — build_context and search_memories see the note at once. To add to an
    existing note, prefer edit_note.

    path_or_title: a title ("Kafka consumer lag" becomes the file "Kafka consumer lag.md" at
    the root of the source; characters a file name cannot hold become "-"), or a path relative
    to the source ending in .md ("projects/kafka/lag.md"; folders are created), or a
    memory://<source>/<path> URI. Paths stay inside the source: "..", absolute paths, hidden
    folders and non-.md files are refused. With several sources, name one with source.
    An existing note is never replaced unless overwrite is true; pass expected_hash (from
    read_memory) as well, so that you never overwrite a change you have not seen.

    Returns action ("created" or "replaced"), uri, path, source, hash (of what was written:
    pass it as expected_hash to a later edit), concepts (the concepts the note now links),
    previousUri (null) and warnings.

    Examples: write_note("Kafka consumer lag", "Lag grew after the [[Kafka]] upgrade.");
    write_note("projects/billing/2026-12-01.md", "# Standup\\n...", source="work");
    write_note("memory://vault/todo.md", "- [ ] ...", overwrite=true, expected_hash="9f2c...").
    """
    return _structured(
        state(ctx).call(
            lambda g: g.write_note(
                path_or_title,
                content,
                source=source,
                overwrite=overwrite,
                expected_hash=expected_hash,
            ).as_dict()
        )
    )


def edit_note(
    ctx: Context,
    identifier: _Identifier,
    operation: Annotated[
        Literal["append", "prepend", "replace_text", "replace_section"],
        Field(description="What to do: append, prepend, replace_text or replace_section."),
    ],
    content: Annotated[
        _Text | None,
        Field(description="The text to add (append/prepend) or the new section body."),
    ] = None,
    find: Annotated[
        str | None, Field(min_length=1, max_length=100_000, description="replace_text: old text.")
    ] = None,
    replace: Annotated[
        str | None, Field(max_length=10 * 1024 * 1024, description="replace_text: new text.")
    ] = None,
    count: Annotated[
        int, _bounded(limits.EDIT_COUNT, "replace_text: how many times find must occur.")
    ] = 1,
    heading: Annotated[
        str | None,
        Field(min_length=1, max_length=1000, description="replace_section: the heading."),
    ] = None,
    expected_hash: _Hash = None,
) -> Annotated[CallToolResult, WriteResult]:
    """Change part of an existing note, in place; the graph follows at once.

    Operations:
    - append: add content at the end of the note (on a new line).
    - prepend: add content at the start (after the frontmatter block, if any).
    - replace_text: replace every occurrence of find by replace. Refused, with nothing
      changed, unless find occurs exactly count times (default 1): read the note first and
      give enough surrounding text to make find unique, or the right count.
    - replace_section: replace the body under the markdown heading `heading` ("Status" or
      "## Status"; case does not matter) up to the next heading of the same or a higher level
      with content. Refused if no heading, or more than one, matches.
    Pass expected_hash (from read_memory or the previous write) so that the edit is refused
    if the note changed since you read it. Replaced text is gone from the note.

    Returns action ("edited", or "unchanged" when the text came out the same), uri, path,
    source, hash (pass it as expected_hash to the next edit), concepts, previousUri (null),
    warnings.

    Examples: edit_note("memory://vault/todo.md", "append", content="- [ ] call [[Ana]]");
    edit_note("Kafka consumer lag", "replace_text", find="grew", replace="shrank");
    edit_note("projects/billing.md", "replace_section", heading="Status", content="Done.").
    """
    return _structured(
        state(ctx).call(
            lambda g: g.edit_note(
                identifier,
                operation,
                content=content,
                find=find,
                replace=replace,
                count=count,
                heading=heading,
                expected_hash=expected_hash,
            ).as_dict()
        )
    )


def move_note(
    ctx: Context,
    identifier: _Identifier,
    new_path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=limits.MAX_PATH_CHARS,
            description="The new source-relative path, ending in .md (or a memory:// URI).",
        ),
    ],
    expected_hash: _Hash = None,
) -> Annotated[CallToolResult, WriteResult]:
    """Move or rename a note within its source; its content and reading history are kept.

    Use this to file a note in a folder or to give it a better name. The note's old URI stops
    working (links by [[title]] elsewhere are not rewritten). Never replaces an existing file:
    a taken new_path is refused. new_path is relative to the note's source, ends in .md, and
    stays inside it (folders are created).

    Returns action ("moved"), uri (the new one), path, source, hash, concepts, previousUri
    (the old URI), warnings.

    Examples: move_note("memory://vault/inbox/idea.md", "projects/idea.md");
    move_note("Kafka consumer lag", "engineering/kafka/consumer-lag.md").
    """
    return _structured(
        state(ctx).call(
            lambda g: g.move_note(identifier, new_path, expected_hash=expected_hash).as_dict()
        )
    )


def delete_note(
    ctx: Context, identifier: _Identifier, expected_hash: _Hash = None
) -> Annotated[CallToolResult, WriteResult]:
    """Delete a note: its file is removed from the user's folder and it leaves the graph.

    This cannot be undone from here. Only delete a note the user asked you to delete, or one
    you wrote yourself and no longer need. Pass expected_hash (from read_memory) so that a note
    changed since you read it is not deleted.

    Returns action ("deleted"), uri, path, source, hash and concepts (of the note that was
    deleted), previousUri (null), warnings.

    Examples: delete_note("memory://vault/scratch/tmp.md");
    delete_note("Old idea", expected_hash="9f2c...").
    """
    return _structured(
        state(ctx).call(lambda g: g.delete_note(identifier, expected_hash=expected_hash).as_dict())
    )


# -- the server ------------------------------------------------------------------------------

_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# A read changes no file but records the read (lastAccessed, a ranking input): not read-only.
_RECORDS_READ = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_SYNC = _RECORDS_READ  # derived state only; repeating it changes nothing more
_CREATES = ToolAnnotations(  # may replace a note (overwrite)
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
_CHANGES = _CREATES  # replace_text/replace_section drop text; append twice appends twice
_DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# (function, annotations, writes files): the one list a new tool joins.
TOOLS: tuple[tuple[Callable[..., CallToolResult], ToolAnnotations, bool], ...] = (
    (build_context, _READ_ONLY, False),
    (expand, _READ_ONLY, False),
    (sync, _SYNC, False),
    (search_memories, _READ_ONLY, False),
    (read_memory, _RECORDS_READ, False),
    (visualize, _READ_ONLY, False),
    (write_note, _CREATES, True),
    (edit_note, _CHANGES, True),
    (move_note, _CHANGES, True),  # the old path is gone (never a file's content)
    (delete_note, _DELETES, True),
)


def one_line(text: str, *, limit: int = 500) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
