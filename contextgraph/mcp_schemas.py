"""The output schemas of the MCP tools: the JSON shapes of the library's ``as_dict()``.

Pydantic lives only at the MCP boundary; these ``TypedDict``s are what the server publishes as
each tool's ``outputSchema`` and what the SDK checks each structured result against. Keys a
result carries beyond these pass through unchanged (the check ignores them), so a field added in
the library reaches clients even before its schema names it; ``tests/test_mcp.py`` keeps the two
in step.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class DirectRelation(TypedDict):
    name: str
    coOccurrenceCount: int
    decayWeight: float
    weightedScore: float
    files: list[str]
    communityId: int | None
    contentPreview: NotRequired[dict[str, str]]


class ExpandedRelation(TypedDict):
    name: str
    depth: int
    via: str
    coOccurrenceCount: int
    weightedScore: float
    communityId: int | None


class CommunitySibling(TypedDict):
    name: str
    communityId: int
    sharedNeighborCount: int
    normalizedOverlap: float


class ContextResult(TypedDict):
    """What belongs with a concept (``build_context``)."""

    conceptName: str
    depth: int
    communityId: int | None
    directRelations: list[DirectRelation]
    expandedRelations: list[ExpandedRelation]
    communitySiblings: list[CommunitySibling]


class Expansion(TypedDict):
    entity: str
    kind: str
    relationshipType: str
    depth: int
    score: float
    via: str | None
    path: NotRequired[str | None]


class ExpandResult(TypedDict):
    """Entities reached from the seeds (``expand``)."""

    seeds: list[str]
    matchedSeeds: list[str]
    results: list[Expansion]


class FileCounts(TypedDict):
    scanned: int
    added: int
    updated: int
    unchanged: int
    deleted: int
    renamed: int
    failed: int


class Problem(TypedDict):
    source: str
    path: str
    reason: str


class SyncResult(TypedDict):
    """What a sync did (``sync``)."""

    sources: list[str]
    missingSources: list[str]
    files: FileCounts
    failed: list[Problem]
    warnings: list[Problem]
    droppedLinks: int
    concepts: int
    relations: int
    entities: int
    codeRelations: int
    communities: int | None
    modularity: float | None
    seconds: dict[str, float]


class SearchHit(TypedDict):
    uri: str
    path: str
    source: str
    title: str
    snippet: str
    score: float
    bm25: float
    decayWeight: float


class SearchResult(TypedDict):
    """One page of full-text hits (``search_memories``)."""

    query: str
    total: int
    page: int
    limit: int
    hits: list[SearchHit]


class NoteResult(TypedDict):
    """One note in full (``read_memory``)."""

    uri: str
    path: str
    source: str
    title: str | None
    content: str
    created: str | None
    modified: str
    lastAccessed: str | None
    concepts: list[str]
    hash: str


class VisualizeResult(TypedDict):
    """A Mermaid flowchart (``visualize``)."""

    concept: str
    mermaid: str


class WriteResult(TypedDict):
    """What a write tool left on disk and in the graph."""

    action: str
    uri: str
    path: str
    source: str
    hash: str
    concepts: list[str]
    previousUri: str | None
    warnings: list[str]
