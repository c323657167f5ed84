"""contextgraph: a local, persistent knowledge graph of markdown notes and code for LLMs."""

from contextgraph.api import ContextGraph
from contextgraph.errors import (
    ContextGraphError,
    InvalidArgument,
    NotFound,
    SourceError,
    SyncInProgress,
    UnsafePath,
)
from contextgraph.settings import Settings

__all__ = [
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
