"""contextgraph: a local, persistent knowledge graph of markdown notes and code for LLMs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextgraph.errors import (
    Conflict,
    ContextGraphError,
    InvalidArgument,
    NotFound,
    SourceError,
    SyncInProgress,
    UnsafePath,
)
from contextgraph.settings import Settings

if TYPE_CHECKING:
    from contextgraph.api import ContextGraph

__all__ = [
    "Conflict",
    "ContextGraph",
    "ContextGraphError",
    "InvalidArgument",
    "NotFound",
    "Settings",
    "SourceError",
    "SyncInProgress",
    "UnsafePath",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # ContextGraph pulls in SQLAlchemy; importing it lazily keeps `import contextgraph.sync.ingest`
    # (what sync's extraction workers load) light.
    if name == "ContextGraph":
        from contextgraph.api import ContextGraph

        return ContextGraph
    raise AttributeError(f"module 'contextgraph' has no attribute {name!r}")
