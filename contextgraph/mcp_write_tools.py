"""The MCP tools that write notes (SPEC §14); the server offers none of them with ``--read-only``.

Each is a small function over one ``ContextGraph`` method, like the reading tools of
:mod:`contextgraph.mcp_tools`, whose server state and result helpers they share.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from contextgraph import limits
from contextgraph.mcp_schemas import WriteResult
from contextgraph.mcp_tools import PathText, SourceName, answer, bounded

# -- writing tools ---------------------------------------------------------------------------

_Hash = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=limits.EXPECTED_HASH.high,
        description="The hash read_memory (or a write) returned: refuse if the note changed.",
    ),
]
_Identifier = Annotated[
    PathText, Field(description="The note: a memory:// URI, a source-relative path, or its title.")
]
_Text = Annotated[str, Field(max_length=limits.NOTE_TEXT.high)]


def write_note(
    ctx: Context,
    path_or_title: Annotated[
        PathText,
        Field(description="A title, a source-relative path ending in .md, or a memory:// URI."),
    ],
    content: Annotated[_Text, Field(description="The whole markdown text of the note.")],
    source: Annotated[SourceName, Field(description="The source to write into.")] = None,
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
    return answer(
        ctx,
        lambda g: g.write_note(
            path_or_title,
            content,
            source=source,
            overwrite=overwrite,
            expected_hash=expected_hash,
        ),
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
        str | None,
        Field(
            min_length=1, max_length=limits.EDIT_FIND.high, description="replace_text: old text."
        ),
    ] = None,
    replace: Annotated[_Text | None, Field(description="replace_text: new text.")] = None,
    count: Annotated[
        int, bounded(limits.EDIT_COUNT, "replace_text: how many times find must occur.")
    ] = 1,
    heading: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=limits.EDIT_HEADING.high,
            description="replace_section: the heading.",
        ),
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
    return answer(
        ctx,
        lambda g: g.edit_note(
            identifier,
            operation,
            content=content,
            find=find,
            replace=replace,
            count=count,
            heading=heading,
            expected_hash=expected_hash,
        ),
    )


def move_note(
    ctx: Context,
    identifier: _Identifier,
    new_path: Annotated[
        PathText,
        Field(description="The new source-relative path, ending in .md (or a memory:// URI)."),
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
    return answer(ctx, lambda g: g.move_note(identifier, new_path, expected_hash=expected_hash))


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
    return answer(ctx, lambda g: g.delete_note(identifier, expected_hash=expected_hash))
