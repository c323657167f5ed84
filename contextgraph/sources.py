"""Registered sources: root folders with unique names (the host part of memory:// URIs)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, insert, select

from contextgraph import db
from contextgraph.errors import InvalidArgument, NotFound, SourceError
from contextgraph.models import Source, table_of

T_SOURCES = table_of(Source)

_NAME_RE = re.compile(r"^[^/\\\x00-\x1f]{1,200}$")


@dataclass(frozen=True)
class SourceInfo:
    id: int
    name: str
    root: Path


def list_sources(conn: Connection) -> list[SourceInfo]:
    """Return every registered source, by name."""
    rows = conn.execute(select(T_SOURCES.c.id, T_SOURCES.c.name, T_SOURCES.c.root)).all()
    return sorted((SourceInfo(r.id, r.name, Path(r.root)) for r in rows), key=lambda s: s.name)


def get_source(conn: Connection, name: str) -> SourceInfo:
    """Return the source called ``name`` or raise NotFound."""
    row = conn.execute(
        select(T_SOURCES.c.id, T_SOURCES.c.name, T_SOURCES.c.root).where(T_SOURCES.c.name == name)
    ).first()
    if row is None:
        raise NotFound(f"no source named {name!r}")
    return SourceInfo(row.id, row.name, Path(row.root))


def register(engine: Engine, root: str | Path, name: str | None = None) -> SourceInfo:
    """Register ``root`` under ``name`` (default: the folder's basename); idempotent.

    Registering the same root again returns the existing source. A name already used by another
    root is an error, so a URI never silently changes meaning.
    """
    path = Path(root).expanduser()
    if not path.is_dir():
        raise SourceError(f"not a folder: {root}")
    resolved = path.resolve()
    chosen = name if name is not None else (resolved.name or "root")
    if not _NAME_RE.match(chosen) or chosen.strip() != chosen:
        raise InvalidArgument(f"invalid source name {chosen!r}: no slashes or control characters")
    with db.write(engine) as conn:
        rows = conn.execute(select(T_SOURCES.c.id, T_SOURCES.c.name, T_SOURCES.c.root)).all()
        for row in rows:
            if Path(row.root) == resolved and (name is None or row.name == chosen):
                return SourceInfo(row.id, row.name, resolved)
            if row.name == chosen:
                raise SourceError(
                    f"source name {chosen!r} is already used for {row.root}; choose another "
                    "with --name"
                )
        new_id = conn.execute(
            insert(T_SOURCES).values(name=chosen, root=str(resolved), created_at=time.time())
        ).inserted_primary_key
        assert new_id is not None
        return SourceInfo(int(new_id[0]), chosen, resolved)
