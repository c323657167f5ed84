"""The one error hierarchy of contextgraph; each door (CLI, MCP) maps it once."""

from __future__ import annotations


class ContextGraphError(Exception):
    """Base class for every error contextgraph raises on purpose."""


class InvalidArgument(ContextGraphError, ValueError):
    """An argument is out of range or malformed (negative depth, empty seed list, ...)."""


class NotFound(ContextGraphError, LookupError):
    """A note, source or entity that was asked for does not exist."""

    @classmethod
    def source(cls, name: str) -> NotFound:
        """No source is named ``name`` (quoted, so an empty or odd name shows as what it is)."""
        return cls(f"no source named {name!r}")


class UnsafePath(ContextGraphError):
    """A path or URI points outside the registered sources, or at the database itself."""


class SyncInProgress(ContextGraphError):
    """Another process holds the sync lock and the caller asked not to wait."""


class SourceError(ContextGraphError):
    """A source root is missing, not a folder, or its name clashes with another source."""


class DatabaseError(ContextGraphError):
    """The database cannot be opened, migrated or written."""


class ReadOnlyDatabase(DatabaseError):
    """The database can be read but not written (its file or folder is read-only)."""


class CorruptDatabase(DatabaseError):
    """The database file is damaged or is not an SQLite database at all."""


class Conflict(ContextGraphError):
    """A write would clobber a file that exists or changed since the caller read it."""
