"""How the store names a file: its ``memory://<source>/<path>`` URI and the hash of its bytes
(and how those bytes are opened: never waiting on a named pipe).

URIs are built in Python and in SQL the same way.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ColumnElement

URI_PREFIX = "memory://"


def file_uri(source: str, path: str) -> str:
    """The ``memory://`` URI of a file: source name, then the path relative to its root."""
    return f"{URI_PREFIX}{source}/{path}"


def file_uri_sql(source: ColumnElement[Any], path: ColumnElement[Any]) -> ColumnElement[str]:
    """The SQL expression of :func:`file_uri` over a source-name and a path column."""
    # Imported here: sync's extraction workers hash files with this module, and need no SQL.
    from sqlalchemy import literal

    uri: ColumnElement[str] = literal(URI_PREFIX) + source + literal("/") + path
    return uri


def content_hash(data: bytes) -> str:
    """The hash the store keeps for a file's bytes (and that ``expected_hash`` compares)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def nonblocking(path: str, flags: int) -> int:
    """An ``open`` opener that never waits: a named pipe put in a file's place would otherwise
    hold the open until some writer came, forever (a regular file ignores the flag). Whoever
    reads through it checks, with ``fstat``, that it got a regular file."""
    return os.open(path, flags | os.O_NONBLOCK)


__all__ = ["URI_PREFIX", "content_hash", "file_uri", "file_uri_sql", "nonblocking"]
