"""``memory://<source>/<path>`` URIs of files, built in Python and in SQL the same way."""

from __future__ import annotations

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


__all__ = ["URI_PREFIX", "file_uri", "file_uri_sql"]
