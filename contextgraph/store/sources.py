"""Registered sources: root folders with unique names (the host part of memory:// URIs)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Row, insert, select

from contextgraph.errors import InvalidArgument, NotFound, SourceError
from contextgraph.limits import SOURCE_NAME
from contextgraph.store import db
from contextgraph.store.models import T_SOURCES

_SOURCE_ROWS = select(T_SOURCES.c.id, T_SOURCES.c.name, T_SOURCES.c.root)
_NAME_RE = re.compile(rf"^[^/\\\x00-\x1f\x7f-\x9f]{{1,{SOURCE_NAME.high}}}$")


@dataclass(frozen=True)
class SourceInfo:
    """A registered source: its id, unique name and root folder."""

    id: int
    name: str
    root: Path

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "root": str(self.root), "exists": self.root.is_dir()}


def list_sources(conn: Connection) -> list[SourceInfo]:
    """Return every registered source, by name."""
    rows = conn.execute(_SOURCE_ROWS).all()
    return sorted((SourceInfo(r.id, r.name, Path(r.root)) for r in rows), key=lambda s: s.name)


def get_source(conn: Connection, name: str) -> SourceInfo:
    """Return the source called ``name`` or raise NotFound."""
    row = conn.execute(_SOURCE_ROWS.where(T_SOURCES.c.name == name)).first()
    if row is None:
        raise NotFound.source(name)
    return SourceInfo(row.id, row.name, Path(row.root))


# Kernel pseudo-filesystems: walking them reads endless or live files, never notes or code.
PSEUDO_ROOTS = tuple(Path(p) for p in ("/proc", "/sys", "/dev"))


def check_root(root: str | os.PathLike[str]) -> Path:
    """Validate a folder to register; return it resolved, or raise SourceError."""
    raw = os.fspath(root)
    if not raw.strip():
        raise SourceError("the folder path is empty: give the folder to sync")
    shown = repr(raw[:200])[1:-1] + ("…" if len(raw) > 200 else "")  # one line, not 100 KB
    try:
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise SourceError(f"not a folder: {shown}")
        resolved = path.resolve()
    except OSError as exc:  # a name or path too long for the system, a loop of links
        raise SourceError(f"not a folder: {shown} ({exc.strerror or exc})") from None
    except RuntimeError:  # expanduser: ``~name`` of no such user, or no home at all
        raise SourceError(f"not a folder: {shown} (no such user's home)") from None
    try:
        str(resolved).encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8: the store keeps paths as text
        raise SourceError(f"the folder's path is not valid UTF-8: {shown}") from None
    if resolved.parent == resolved:
        raise SourceError(f"refusing to sync the file-system root {resolved}: give a folder in it")
    for pseudo in PSEUDO_ROOTS:
        if resolved == pseudo or pseudo in resolved.parents:
            raise SourceError(
                f"refusing to sync {resolved}: {pseudo} is a kernel pseudo-filesystem"
            )
    return resolved


def register(engine: Engine, root: str | os.PathLike[str], name: str | None = None) -> SourceInfo:
    """Register ``root`` under ``name`` (default: the folder's basename); idempotent.

    Registering the same root again returns the existing source, and writes nothing (a read
    finds it: ``sync ~/notes`` run after every edit takes no write lock to register, and a
    resident server can answer it, :mod:`contextgraph.store.nowrite`). One folder is one source:
    a root that is already a source under another name, or that lies inside or around a source,
    is refused, as is a name already used by another root (a URI never silently changes meaning).
    """
    resolved = check_root(root)
    chosen = name if name is not None else (resolved.name or "root")
    with db.read(engine) as conn:  # a source registered already keeps its name as it is
        known = _same_root(conn.execute(_SOURCE_ROWS).all(), resolved, name)
    if known is not None:
        return known
    if not _NAME_RE.match(SOURCE_NAME.check(chosen)) or chosen.strip() != chosen:
        raise InvalidArgument(f"invalid source name {chosen!r}: no slashes or control characters")
    with db.write(engine) as conn:  # looked at again: another process may have registered it
        rows = conn.execute(_SOURCE_ROWS).all()
        known = _same_root(rows, resolved, name)
        if known is not None:
            return known
        for row in rows:
            existing = Path(row.root)
            if existing in resolved.parents:
                raise SourceError(f"{resolved} lies inside the source {row.name!r} ({existing})")
            if resolved in existing.parents:
                raise SourceError(f"{resolved} holds the source {row.name!r} ({existing})")
            if row.name == chosen:
                raise SourceError(
                    f"source name {chosen!r} is already used for {row.root}; choose another name"
                )
        new_id = conn.execute(
            insert(T_SOURCES).values(name=chosen, root=str(resolved), created_at=time.time())
        ).inserted_primary_key
        assert new_id is not None
        return SourceInfo(int(new_id[0]), chosen, resolved)


def _same_root(
    rows: Sequence[Row[Any, Any, Any]], resolved: Path, name: str | None
) -> SourceInfo | None:
    """The source of ``rows`` whose root is ``resolved``, when registering it again under
    ``name`` (None: any) is a no-op; None when no source has that root. SourceError when one
    has it under another name than the one asked for."""
    for row in rows:
        if Path(row.root) == resolved:
            if name is None or row.name == name:
                return SourceInfo(row.id, row.name, resolved)
            raise SourceError(f"{resolved} is already the source {row.name!r}")
    return None
