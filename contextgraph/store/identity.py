"""How the store names a file: its ``memory://<source>/<path>`` URI and the hash of its bytes.

URIs are built in Python and in SQL the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import literal
from sqlalchemy.sql.elements import ColumnElement

URI_PREFIX = "memory://"


def file_uri(source: str, path: str) -> str:
    """The ``memory://`` URI of a file: source name, then the path relative to its root."""
    return f"{URI_PREFIX}{source}/{path}"


def file_uri_sql(source: ColumnElement[Any], path: ColumnElement[Any]) -> ColumnElement[str]:
    """The SQL expression of :func:`file_uri` over a source-name and a path column."""
    uri: ColumnElement[str] = literal(URI_PREFIX) + source + literal("/") + path
    return uri


def content_hash(data: bytes) -> str:
    """The hash the store keeps for a file's bytes (and that ``expected_hash`` compares)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


__all__ = ["URI_PREFIX", "content_hash", "file_uri", "file_uri_sql"]
