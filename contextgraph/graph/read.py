"""Read one note (SPEC §9): resolve an identifier safely, return it, record the read.

An identifier is a ``memory://<source>/<path>`` URI, a source-relative path, or a note title.
Only files the store knows are served, and only from inside their source root: ``..`` segments,
absolute paths, percent-encoded (``%2e``, ``%2f``, ``%5c``, ``%00``) forms, NUL bytes, symlinks
that lead out of the root and the database files are refused with :class:`UnsafePath`. URIs are
not percent-decoded at all (contextgraph writes them with raw paths), so no encoded form can
smuggle a separator past the checks.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import Connection, Engine, Select, func, or_, select, update

from contextgraph.errors import InvalidArgument, NotFound, UnsafePath
from contextgraph.graph.searchterms import display_title, first_heading
from contextgraph.limits import MAX_PATH_CHARS
from contextgraph.store import db
from contextgraph.store.dialect import greatest
from contextgraph.store.identity import URI_PREFIX, content_hash, file_uri, nonblocking
from contextgraph.store.meta import bump_version
from contextgraph.store.models import T_ENTITIES, T_FILES, T_MENTIONS, T_SOURCES

# Percent-encodings a path may not hold (a title never spells one: writing.title_to_filename).
ENCODED = re.compile(r"%(?:2e|2f|5c|00|25)", re.IGNORECASE)


@dataclass(frozen=True)
class Note:
    uri: str
    path: str
    source: str
    title: str | None
    content: str
    created: str | None
    modified: str
    last_accessed: str | None
    concepts: tuple[str, ...]
    hash: str = ""  # of the bytes read: pass it back as ``expected_hash`` to edit safely

    def as_dict(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "path": self.path,
            "source": self.source,
            "title": self.title,
            "content": self.content,
            "created": self.created,
            "modified": self.modified,
            "lastAccessed": self.last_accessed,
            "concepts": list(self.concepts),
            "hash": self.hash,
        }


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


def check_relative(path: str) -> str:
    """Validate a source-relative path; return it in posix form or raise UnsafePath."""
    if not path or len(path) > MAX_PATH_CHARS:
        raise UnsafePath("the path is empty or too long")
    if "\x00" in path:
        raise UnsafePath("the path contains a NUL byte")
    if ENCODED.search(path):
        raise UnsafePath("percent-encoded dots, slashes or NULs are refused")
    unified = path.replace("\\", "/")
    if unified.startswith("/") or re.match(r"^[A-Za-z]:", unified) or unified.startswith("~"):
        raise UnsafePath("absolute paths are refused: give a path relative to its source")
    if any(part == ".." for part in unified.split("/")):
        raise UnsafePath("'..' is refused: paths stay inside their source")
    # A backslash is an ordinary file-name character here: only '/' separates.
    return "/".join(p for p in path.split("/") if p not in ("", "."))


def _candidates(conn: Connection, identifier: str) -> list[Any]:
    columns = (
        T_FILES.c.id,
        T_FILES.c.path,
        T_FILES.c.title,
        T_FILES.c.created,
        T_FILES.c.modified,
        T_FILES.c.last_accessed,
        T_FILES.c.search_meta,  # holds a note's first heading: a title when it has no other
        T_FILES.c.hash,  # what the store read: a writer compares it with the file
        T_SOURCES.c.name.label("source"),
        T_SOURCES.c.root,
    )
    base = select(*columns).join(T_SOURCES, T_SOURCES.c.id == T_FILES.c.source_id)
    if identifier.startswith(URI_PREFIX):
        rest = identifier[len(URI_PREFIX) :]
        source, _, path = rest.partition("/")
        if not source or not path:
            raise InvalidArgument("a memory:// URI needs a source name and a path")
        query = base.where(T_SOURCES.c.name == source)
        try:
            rel = check_relative(path)
        except UnsafePath:
            rows = stored_as_named(conn, query, path)
            if rows:
                return rows
            raise
        return _spelled(conn, query, rel)
    if "://" in identifier:
        raise UnsafePath("only memory:// URIs are served")
    try:
        rel = check_relative(identifier)
    except UnsafePath:  # no path, but maybe a title ("~draft", "Q: what now")
        if len(identifier) > MAX_PATH_CHARS or "\x00" in identifier:
            raise  # nor a title: every title is a shorter text
        named = stored_as_named(conn, base.order_by(T_SOURCES.c.name), identifier)
        if named:
            return named
        titled = _titled(conn, base, identifier, unicodedata.normalize("NFC", identifier))
        if not titled:
            raise  # said as a path's refusal: nothing is titled so either
        return titled
    rows = _spelled(conn, base.order_by(T_SOURCES.c.name), rel)
    if rows:
        return rows
    return _titled(conn, base, identifier, unicodedata.normalize("NFC", rel))


def stored_as_named(conn: Connection, query: Select[Any], path: str) -> list[Any]:
    """The rows of ``query`` stored at exactly ``path``: for a name that
    :func:`check_relative` refuses as typed input but a sync took from the folder as it is
    (``~draft.md``, ``C:notes.md``, ``100%25.md``, ``x\\..\\y.md``). A sync stores no ``..``
    part and no leading ``/``, and :func:`confine` still checks where the file leads."""
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        return []
    return list(conn.execute(query.where(T_FILES.c.path == path)))


def _spelled(conn: Connection, query: Select[Any], path: str) -> list[Any]:
    """The rows of ``query`` whose path is ``path`` as typed, else in another Unicode normal
    form: a vault written on macOS names its files in NFD (``e`` + U+0301 for ``é``), a
    terminal or a client types NFC. The exact spelling first: NFC and NFD twins are two files.
    """
    rows = list(conn.execute(query.where(T_FILES.c.path == path)))
    forms = {unicodedata.normalize("NFC", path), unicodedata.normalize("NFD", path)} - {path}
    if rows or not forms:
        return rows
    return list(conn.execute(query.where(T_FILES.c.path.in_(sorted(forms)))))


def _titled(conn: Connection, base: Select[Any], identifier: str, composed: str) -> list[Any]:
    """The rows ``identifier`` names as a title: the title search shows (frontmatter title,
    else a note's first ``#`` heading: :func:`~contextgraph.graph.searchterms.display_title`)
    or the file name without its extension (a note's or a code file's), case-insensitively and
    in either Unicode normal form; or whose path is ``composed`` (the path asked for, NFC). The
    LIKE only narrows the rows the exact tests then see, and only the notes without a title
    whose search terms hold the identifier have their text read, for their first heading.
    Only the store is read: no path reaches the disk here."""
    folded = _fold(identifier.strip())
    like = "%" + _narrowing_pattern(identifier.strip()) + "%"
    rows = conn.execute(
        base.where(
            or_(
                # a title as YAML keeps it may have blanks around it (search shows it stripped)
                func.lower(T_FILES.c.title).like(like, escape="\\"),
                func.lower(T_FILES.c.path).like(like, escape="\\"),
                func.lower(T_FILES.c.search_meta).like(like, escape="\\"),
            )
        ).order_by(T_SOURCES.c.name, T_FILES.c.path)
    ).all()
    headed = [r.id for r in rows if _may_be_headed(r, folded)]
    headings = {}
    if headed:
        texts = conn.execute(select(T_FILES.c.id, T_FILES.c.text).where(T_FILES.c.id.in_(headed)))
        headings = {i: first_heading(text or "") for i, text in texts}
    return [
        r
        for r in rows
        if _names_title(r, folded, composed) or _fold(headings.get(r.id) or "") == folded
    ]


def _may_be_headed(row: Any, folded: str) -> bool:
    """Whether ``row`` is a note without a frontmatter title whose first heading may be the
    title ``folded``: its search terms (path words, heading, ...) hold it."""
    untitled = row.title is None or not row.title.strip()
    note = row.path.lower().endswith(".md")
    return untitled and note and row.search_meta is not None and folded in _fold(row.search_meta)


def _fold(text: str) -> str:
    """``text`` as titles are compared: composed (NFC), then lower case."""
    return unicodedata.normalize("NFC", text).lower()


def _narrowing_pattern(identifier: str) -> str:
    """A LIKE pattern (escape ``\\``) that every title or path :func:`_names_title` accepts
    holds. SQL's ``lower`` and SQLite's LIKE fold ASCII letters only, so each non-ASCII
    character of the composed identifier becomes ``%``: in the stored text it may be in
    another case or decomposed (NFD ``e`` + U+0301 for ``é``)."""
    parts: list[str] = []
    for char in unicodedata.normalize("NFC", identifier):
        if char.isascii():
            parts.append(db.escape_like(char.lower()))
        elif not parts or parts[-1] != "%":
            parts.append("%")
    return "".join(parts)


def _names_title(row: Any, folded: str, composed: str) -> bool:
    if row.title is not None and _fold(row.title.strip()) == folded:
        return True
    if unicodedata.normalize("NFC", row.path) == composed:
        return True
    stem = _fold(str(PurePosixPath(row.path).with_suffix("")))
    return stem == folded or stem.endswith("/" + folded)


MAX_LISTED = 10


def read_note(
    engine: Engine,
    identifier: str,
    *,
    database: Path | None,
    now: float | None = None,
    retry_seconds: float = 120.0,
) -> Note:
    """Return the note behind ``identifier`` and record the read in ``last_accessed``."""
    row = resolve(engine, identifier)
    data = _read_inside(Path(row.root), row.path, database)
    text = data.decode("utf-8", errors="replace")
    content = text[1:] if text.startswith("\ufeff") else text
    stamp = now if now is not None else time.time()
    with db.write(engine, retry_seconds=retry_seconds) as conn:
        # A read can only make a note fresher: never move last_accessed backwards.
        conn.execute(
            update(T_FILES)
            .where(T_FILES.c.id == row.id)
            .values(last_accessed=greatest(func.coalesce(T_FILES.c.last_accessed, stamp), stamp))
        )
        bump_version(conn)  # the read changes decay weights: cached neighbourhoods are stale
        last = conn.execute(
            select(T_FILES.c.last_accessed).where(T_FILES.c.id == row.id)
        ).scalar_one_or_none()
        concepts = tuple(
            r[0]
            for r in conn.execute(
                select(T_ENTITIES.c.name)
                .join(T_MENTIONS, T_MENTIONS.c.concept_id == T_ENTITIES.c.id)
                .where(T_MENTIONS.c.file_id == row.id)
                .order_by(T_ENTITIES.c.name)
            )
        )
    return Note(
        uri=file_uri(row.source, row.path),
        path=row.path,
        source=row.source,
        title=display_title(row.title, content, row.path),
        content=content,
        created=_iso(row.created),
        modified=_iso(row.modified) or "",
        last_accessed=_iso(last),
        concepts=concepts,
        hash=content_hash(data),
    )


def resolve(engine: Engine, identifier: str) -> Any:
    """The one stored file ``identifier`` names (id, path, source, root, ...), or raise."""
    if not isinstance(identifier, str) or not identifier.strip():
        raise InvalidArgument("give a memory:// URI, a source-relative path or a note title")
    with db.read(engine) as conn:
        rows = _candidates(conn, identifier)
    if not rows:
        raise NotFound(f"no note matches {identifier[:200]!r}")
    if len(rows) > 1:
        uris = ", ".join(file_uri(r.source, r.path) for r in rows[:MAX_LISTED])
        more = f" and {len(rows) - MAX_LISTED} more" if len(rows) > MAX_LISTED else ""
        raise InvalidArgument(
            f"{identifier[:200]!r} is ambiguous: {len(rows)} files match: {uris}{more}"
        )
    return rows[0]


def confine(root: Path, rel: str, database: Path | None) -> str:
    """The real path of ``rel`` under ``root``; UnsafePath if it leads out or at the database.

    ``rel`` must already have passed :func:`check_relative`. The file need not exist (writes
    confine their target too): symlinks in the existing part of the path are resolved.
    """
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, rel))
    if not (target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)):
        raise UnsafePath("the file leads outside its source (symlink)")
    if database is not None:
        db_real = os.path.realpath(database)
        if (
            target == db_real
            or target.startswith(db_real + "-")
            or target.startswith(db_real + ".")
        ):
            raise UnsafePath("the database files are never served")
    return target


def read_regular(target: str) -> bytes:
    """The bytes of the regular file at ``target``, else OSError (IsADirectoryError for a
    folder), opened without blocking (:func:`nonblocking`)."""
    with open(target, "rb", opener=nonblocking) as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", target)
        return handle.read()


def _read_inside(root: Path, rel: str, database: Path | None) -> bytes:
    target = confine(root, rel, database)
    try:
        data = read_regular(target)
    except FileNotFoundError as exc:
        raise NotFound(f"{rel} is gone from disk: sync its source again") from exc
    except OSError as exc:
        raise NotFound(f"{rel} cannot be read: {exc.strerror or exc}") from exc
    return data
