"""contextgraph: a local, persistent knowledge graph of markdown notes and code for LLMs."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: a CLI run that a resident server answers never loads it
if TYPE_CHECKING:
    from typing import Any

    from contextgraph.api import ContextGraph
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

_ERRORS = frozenset(__all__) - {"ContextGraph", "Settings"}


def __getattr__(name: str) -> Any:
    # Loaded on first use: ContextGraph pulls in SQLAlchemy (sync's extraction workers import
    # contextgraph.sync.ingest and must stay light), and even the settings and errors cost a
    # CLI run that only forwards its query (contextgraph.launch) a third of its imports.
    if name == "ContextGraph":
        from contextgraph.api import ContextGraph

        return ContextGraph
    if name == "Settings":
        from contextgraph.settings import Settings

        return Settings
    if name in _ERRORS:
        from contextgraph import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'contextgraph' has no attribute {name!r}")
