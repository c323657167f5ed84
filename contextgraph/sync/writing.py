"""Write, edit, move and delete notes (SPEC §14): the files stay the truth, the store follows.

Every operation takes the one-sync lock, changes the file, then syncs just that file (and, for a
move, its old path) through :func:`contextgraph.sync.run.sync_paths` before releasing the lock, so
the next query in any process sees the change and two writers never interleave. Paths are
confined exactly as :func:`contextgraph.graph.read.read_note` confines them (``check_relative`` and
``confine``), and must name a ``.md`` file that a sync would take (no hidden or dependency
folders). Writes are atomic: a hidden temporary file in the target's folder, fsync, rename over
the target, fsync of the folder. ``expected_hash`` (the ``hash`` that ``read`` or an earlier
write returned) refuses to replace a file that changed since.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from sqlalchemy import Engine, select

from contextgraph.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    SourceError,
    UnsafePath,
)
from contextgraph.graph.read import ENCODED, check_relative, confine, read_regular, resolve
from contextgraph.limits import (
    EXPECTED_HASH,
    MAX_PATH_CHARS,
    NOTE_TEXT,
    replace_lone_surrogates,
)
from contextgraph.settings import Settings
from contextgraph.store import db, nowrite
from contextgraph.store.identity import URI_PREFIX, content_hash, file_uri
from contextgraph.store.models import T_ENTITIES, T_FILES, T_MENTIONS, T_SOURCES
from contextgraph.store.sources import SourceInfo, get_source, list_sources
from contextgraph.sync.atomicfile import atomic_write, fsync_folder
from contextgraph.sync.noteedits import BOM, FRONTMATTER, OPERATIONS, edited
from contextgraph.sync.run import SyncReport, lock_database, sync_paths
from contextgraph.sync.scan import SKIPPED_DIRS, file_kind, scannable

Action = Literal["created", "replaced", "edited", "unchanged", "moved", "deleted"]

MAX_NAME_BYTES = 200  # of a file name from a title, before ".md" (file systems allow 255)
_UNSAFE_CHARS = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*]')
_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Written:
    """What a write operation left on disk and in the store.

    For a delete, ``hash`` and ``concepts`` describe the note that was removed; for a move,
    ``previous_uri`` is where it was.
    """

    action: Action
    uri: str
    path: str
    source: str
    hash: str
    concepts: tuple[str, ...]
    previous_uri: str | None = None
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "uri": self.uri,
            "path": self.path,
            "source": self.source,
            "hash": self.hash,
            "concepts": list(self.concepts),
            "previousUri": self.previous_uri,
            "warnings": list(self.warnings),
        }


def title_to_filename(title: str) -> str:
    """Map a note title to a safe file name ending in ``.md``.

    The mapping, applied in order:

    1. Unicode is normalised to NFC (so one title gives one name on every platform).
    2. Control characters (U+0000-U+001F, U+007F) and the characters that some file system
       refuses or reads as a separator, ``< > : " / \\ | ? *``, become ``-``.
    3. A ``%`` that reads as a percent-encoded dot, slash, backslash, NUL or ``%``
       (``%2e``, ...) becomes ``-``: paths holding one are refused when read.
    4. Runs of whitespace become one space; leading and trailing spaces, dots and dashes are
       removed, and leading ``~`` too (a leading dot would hide the file from sync, a leading
       ``~`` reads as a home folder; Windows drops trailing dots and spaces).
    5. Names Windows reserves (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM0``-``COM9``,
       ``LPT0``-``LPT9``, with any extension) get a trailing ``_``.
    6. The name is cut to 200 UTF-8 bytes at a character boundary (file systems allow 255).
    7. An empty result becomes ``untitled``; ``.md`` is appended.

    So ``"../etc/passwd"`` becomes ``etc-passwd.md`` and ``"TCP/IP"`` becomes ``TCP-IP.md``:
    a title never names a folder and never leaves the source. Letters of any script are kept.
    """
    name = unicodedata.normalize("NFC", title)
    name = _UNSAFE_CHARS.sub("-", name)
    name = ENCODED.sub(lambda m: "-" + m.group()[1:], name)
    name = " ".join(name.split())
    name = name.lstrip(" .-~").rstrip(" .-")
    if _RESERVED.match(name):
        name += "_"
    encoded = name.encode("utf-8")
    if len(encoded) > MAX_NAME_BYTES:
        name = encoded[:MAX_NAME_BYTES].decode("utf-8", "ignore").rstrip(" .-")
    return (name or "untitled") + ".md"


def write_note(
    engine: Engine,
    settings: Settings,
    path_or_title: str,
    content: str,
    *,
    source: str | None = None,
    overwrite: bool = False,
    expected_hash: str | None = None,
) -> Written:
    """Create (or, with ``overwrite``, replace) a note; sync it; return what was written.

    ``path_or_title`` is a ``memory://`` URI, a source-relative path ending in ``.md``, or a
    title (anything else), which :func:`title_to_filename` turns into a file name at the root of
    the source. A title that the file name cannot spell exactly is kept as frontmatter
    ``title:`` (when the content has no frontmatter), so ``read(title)`` finds the note.
    """
    if not isinstance(path_or_title, str) or not path_or_title.strip():
        raise InvalidArgument("give a path ending in .md, a memory:// URI or a title")
    if len(path_or_title) > MAX_PATH_CHARS:
        raise InvalidArgument(f"the path or title is longer than {MAX_PATH_CHARS} characters")
    _encode(content, settings)  # the content's own bounds, before waiting for the lock
    database = db.database_path(engine)
    with _writing(engine):
        info, rel, title = _target(engine, path_or_title, source)
        body = content.removeprefix(BOM)
        if title is not None and PurePosixPath(rel).stem != title and not FRONTMATTER.match(body):
            header = f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n"
            content = content[: len(content) - len(body)] + header + body
        data = _encode(content, settings)  # the file's bytes, title included, within the cap
        target = _confined_target(info, rel, database)
        current = _current_bytes(target, rel)
        if current is not None and not overwrite:
            raise Conflict(f"{rel} already exists: pass overwrite to replace it, or edit it")
        _check_expected(current, expected_hash, rel)
        with _file_errors(rel):
            _make_folders(info, rel, database)
            atomic_write(target, data)
        report = sync_paths(engine, settings, info.name, [rel], locked=True, reread=True)
    action: Action = "created" if current is None else "replaced"
    return _result(engine, info, rel, action, content_hash(data), report)


def edit_note(
    engine: Engine,
    settings: Settings,
    identifier: str,
    operation: str,
    *,
    content: str | None = None,
    find: str | None = None,
    replace: str | None = None,
    count: int = 1,
    heading: str | None = None,
    expected_hash: str | None = None,
) -> Written:
    """Change a stored note in place and sync it.

    Operations: ``append`` (``content`` at the end, on a new line), ``prepend`` (``content`` at
    the start, after any frontmatter), ``replace_text`` (every occurrence of ``find`` by
    ``replace``; refused unless there are exactly ``count`` of them), ``replace_section`` (the
    body under the markdown heading ``heading``, up to the next heading of the same or a higher
    level, becomes ``content``; headings inside fenced code do not count).
    """
    if operation not in OPERATIONS:
        raise InvalidArgument(
            f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}"
        )
    database = db.database_path(engine)
    with _writing(engine):
        row = _resolve_note(engine, identifier)
        info = _source(engine, row.source)
        target, current = _stored_note(info, row.path, database, expected_hash)
        try:
            text = current.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgument(f"{row.path} is not valid UTF-8: edit it by hand") from exc
        new_text = edited(text, operation, content, find, replace, count, heading)
        data = _encode(new_text, settings)
        if data == current:
            report = SyncReport()
            if content_hash(current) != row.hash:  # changed on disk since the store read it
                report = sync_paths(engine, settings, info.name, [row.path], locked=True)
            action: Action = "unchanged"
        else:
            with _file_errors(row.path):
                atomic_write(target, data)
            report = sync_paths(engine, settings, info.name, [row.path], locked=True, reread=True)
            action = "edited"
    return _result(engine, info, row.path, action, content_hash(data), report)


def move_note(
    engine: Engine,
    settings: Settings,
    identifier: str,
    new_path: str,
    *,
    expected_hash: str | None = None,
) -> Written:
    """Rename a note within its source (never over an existing file); the store keeps its reads."""
    if not isinstance(new_path, str) or not new_path.strip():
        raise InvalidArgument("give the new path, relative to the note's source")
    other = None
    if new_path.startswith(URI_PREFIX):
        other, _, new_path = new_path[len(URI_PREFIX) :].partition("/")
    rel = _note_path(new_path)
    database = db.database_path(engine)
    with _writing(engine):
        row = _resolve_note(engine, identifier)
        info = _source(engine, row.source)
        if other is not None and other != info.name:
            raise InvalidArgument(f"a note moves within its source {info.name!r}, not to {other!r}")
        _, current = _stored_note(info, row.path, database, expected_hash)
        if rel == row.path:
            return _result(engine, info, rel, "unchanged", content_hash(current), SyncReport())
        target = _confined_target(info, rel, database)
        if os.path.lexists(target):
            raise Conflict(f"{rel} already exists: moves never replace a file")
        if content_hash(current) != row.hash:
            # Changed on disk since the store read it: read it first, so that the move is
            # known by its content as a rename and keeps the note's reads.
            sync_paths(engine, settings, info.name, [row.path], locked=True, reread=True)
        source_path = os.path.join(os.path.realpath(info.root), row.path)
        with _file_errors(rel):
            _make_folders(info, rel, database)
            os.rename(source_path, target)
            fsync_folder(os.path.dirname(target))
            fsync_folder(os.path.dirname(source_path))
        report = sync_paths(engine, settings, info.name, [row.path, rel], locked=True)
    return _result(
        engine,
        info,
        rel,
        "moved",
        content_hash(current),
        report,
        previous=file_uri(info.name, row.path),
    )


def delete_note(
    engine: Engine,
    settings: Settings,
    identifier: str,
    *,
    expected_hash: str | None = None,
) -> Written:
    """Delete a note's file and retract it from the store."""
    database = db.database_path(engine)
    with _writing(engine):
        row = _resolve_note(engine, identifier)
        info = _source(engine, row.source)
        _, current = _stored_note(info, row.path, database, expected_hash)
        concepts = _concepts(engine, row.source, row.path)
        lexical = os.path.join(os.path.realpath(info.root), row.path)
        with _file_errors(row.path):
            os.unlink(lexical)
            fsync_folder(os.path.dirname(lexical))
        report = sync_paths(engine, settings, info.name, [row.path], locked=True)
    return Written(
        action="deleted",
        uri=file_uri(info.name, row.path),
        path=row.path,
        source=info.name,
        hash=content_hash(current),
        concepts=concepts,
        warnings=_warnings(report, row.path),
    )


# -- where a note goes -----------------------------------------------------------------------


def _target(
    engine: Engine, path_or_title: str, source: str | None
) -> tuple[SourceInfo, str, str | None]:
    """(source, relative path, title or None) for a write."""
    if path_or_title.startswith(URI_PREFIX):
        named, _, path = path_or_title[len(URI_PREFIX) :].partition("/")
        if not named or not path:
            raise InvalidArgument("a memory:// URI needs a source name and a path")
        if source is not None and source != named:
            raise InvalidArgument(f"the URI names source {named!r} but source is {source!r}")
        return _source(engine, named), _note_path(path), None
    if "://" in path_or_title:
        raise UnsafePath("only memory:// URIs are written")
    info = _source(engine, source)
    if path_or_title.lower().endswith(".md"):
        return info, _note_path(path_or_title), None
    # The title as frontmatter keeps every printable character; control characters are spaces.
    printable = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in path_or_title)
    title = " ".join(unicodedata.normalize("NFC", printable).split())
    return info, title_to_filename(path_or_title), title


def _source(engine: Engine, name: str | None) -> SourceInfo:
    """The source ``name`` (the only one when None), whose folder must be there: a write never
    creates a source's folder again."""
    with db.read(engine) as conn:
        if name is not None:
            info = get_source(conn, name)
        else:
            sources = list_sources(conn)
            if not sources:
                raise NotFound("no sources registered: sync a folder first")
            if len(sources) > 1:
                names = ", ".join(s.name for s in sources[:10])
                raise InvalidArgument(f"several sources ({names}): say which one with source")
            info = sources[0]
    if not os.path.isdir(info.root):
        raise SourceError(
            f"the folder of source {info.name!r} ({info.root}) is gone: restore it, or forget "
            "the source"
        )
    return info


def _resolve_note(engine: Engine, identifier: str) -> Any:
    """The stored note ``identifier`` names; a code file is read, never changed, by note tools."""
    row = resolve(engine, identifier)
    if file_kind(PurePosixPath(row.path).name) != "note":
        raise InvalidArgument(
            f"{row.path[:200]!r} is not a note: the note tools change .md files only"
        )
    return row


def _note_path(path: str) -> str:
    """Check a source-relative path for a note: confined as reads are, ``.md``, seen by sync."""
    rel = check_relative(path)
    if not rel:
        raise UnsafePath("the path is empty")
    parts = rel.split("/")
    if file_kind(parts[-1]) != "note":
        raise InvalidArgument(f"notes are .md files: {rel[:200]!r} is not one")
    for part in parts:
        if part.startswith("."):
            raise UnsafePath("hidden files and folders are not synced: choose another path")
        if part in SKIPPED_DIRS:
            raise UnsafePath(f"{part!r} folders are not synced: choose another path")
        if any(unicodedata.category(ch) == "Cc" for ch in part):
            raise UnsafePath("the path contains control characters")
        if len(part.encode("utf-8")) > 255:
            raise InvalidArgument("a file or folder name is longer than 255 bytes")
    return rel


def _confined_target(info: SourceInfo, rel: str, database: Path | None) -> str:
    """The real path to write ``rel`` at; a symlink there is refused (write to its target), and
    so is a folder that a sync does not walk into (one holding ``pyvenv.cfg``)."""
    target = confine(info.root, rel, database)
    real_root = _refuse_link(info, rel, "write to the file it points to")
    if not scannable(real_root, rel):
        raise UnsafePath(f"a sync does not look inside the folder of {rel[:200]}: choose another")
    if os.path.isdir(target):
        raise Conflict(f"{rel} is a folder")
    return target


def _refuse_link(info: SourceInfo, rel: str, advice: str) -> str:
    """The source's real root, once ``rel`` under it is known not to be a symlink: the note
    tools change a note's own file, never one through a link (UnsafePath, with ``advice``)."""
    real_root = os.path.realpath(info.root)
    if os.path.islink(os.path.join(real_root, rel)):
        raise UnsafePath(f"{rel} is a symlink: {advice}")
    return real_root


def _make_folders(info: SourceInfo, rel: str, database: Path | None) -> None:
    parent = PurePosixPath(rel).parent
    if str(parent) == ".":
        return
    real_root = os.path.realpath(info.root)
    _mkdirs(os.path.join(real_root, str(parent)))
    confine(info.root, str(parent), database)  # a folder swapped for a link meanwhile


def _mkdirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` without its recursion, one call per level: a
    note 1,000 folders deep (2,000 characters, inside the path limit) overflowed the stack."""
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not os.path.isdir(folder):  # a file of that name: said as makedirs says it
                raise


# -- the bytes -------------------------------------------------------------------------------


def _encode(content: str, settings: Settings) -> bytes:
    if not isinstance(content, str):
        raise InvalidArgument(f"content must be text, not {type(content).__name__}")
    NOTE_TEXT.check(content)
    if "\x00" in content:
        raise InvalidArgument("content contains NUL characters: notes are text")
    data = replace_lone_surrogates(content).encode("utf-8")
    if len(data) > settings.max_file_bytes:
        raise InvalidArgument(f"content is over {settings.max_file_bytes} bytes")
    return data


def _stored_note(
    info: SourceInfo, rel: str, database: Path | None, expected_hash: str | None
) -> tuple[str, bytes]:
    """The confined path and bytes of a stored note that must still be on disk, as last read."""
    target = confine(info.root, rel, database)
    _refuse_link(info, rel, "change the file it points to")
    current = _current_bytes(target, rel)
    if current is None:
        raise NotFound(f"{rel} is gone from disk; run `contextgraph sync`")
    _check_expected(current, expected_hash, rel)
    return target, current


def _current_bytes(target: str, rel: str) -> bytes | None:
    try:
        return read_regular(target)
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise Conflict(f"{rel[:200]} is a folder") from exc
    except OSError as exc:
        raise InvalidArgument(f"{rel[:200]} cannot be read: {exc.strerror or exc}") from exc


def _check_expected(current: bytes | None, expected_hash: str | None, rel: str) -> None:
    if expected_hash is None:
        return
    EXPECTED_HASH.check(expected_hash)
    if current is None:
        raise Conflict(f"{rel} was deleted since it was read: nothing written")
    actual = content_hash(current)
    if actual != expected_hash.strip().lower():
        raise Conflict(
            f"{rel} changed since it was read (hash {actual}, expected {expected_hash[:64]!r}): "
            "read it again and redo the change"
        )


# -- results ---------------------------------------------------------------------------------


@contextmanager
def _writing(engine: Engine) -> Iterator[None]:
    """Hold the one-sync lock for a write (the file lock, or PostgreSQL's advisory lock).

    A database that cannot record the change (a read-only file, a run that refuses writes) is
    refused before the lock and before any file is touched. The caller reads the source and the
    note under the lock, where no other sync or write can remove or change them.
    """
    db.check_writable(engine, "write notes")
    nowrite.check("write notes")
    with lock_database(engine, wait=True):
        yield


@contextmanager
def _file_errors(rel: str) -> Iterator[None]:
    """Report a file system's refusal to change ``rel`` as a clear error, not an OSError."""
    try:
        yield
    except FileExistsError as exc:
        raise Conflict(f"{rel[:200]}: {exc.strerror or exc} on the way there") from exc
    except OSError as exc:
        raise InvalidArgument(f"cannot change {rel[:200]}: {exc.strerror or exc}") from exc


def _concepts(engine: Engine, source: str, path: str) -> tuple[str, ...]:
    t_sources = T_SOURCES
    with db.read(engine) as conn:
        rows = conn.execute(
            select(T_ENTITIES.c.name)
            .join(T_MENTIONS, T_MENTIONS.c.concept_id == T_ENTITIES.c.id)
            .join(T_FILES, T_FILES.c.id == T_MENTIONS.c.file_id)
            .join(t_sources, t_sources.c.id == T_FILES.c.source_id)
            .where(t_sources.c.name == source, T_FILES.c.path == path)
            .order_by(T_ENTITIES.c.name)
        )
        return tuple(r[0] for r in rows)


def _warnings(report: SyncReport, rel: str) -> tuple[str, ...]:
    failed = [p.reason for p in report.failed if p.path == rel]
    if failed:
        # The file is on disk but the store could not take it: say so rather than pretend.
        raise InvalidArgument(f"{rel} was written but could not be synced: {failed[0]}")
    return tuple(p.reason for p in report.warnings if p.path == rel)


def _result(
    engine: Engine,
    info: SourceInfo,
    rel: str,
    action: Action,
    digest: str,
    report: SyncReport,
    *,
    previous: str | None = None,
) -> Written:
    return Written(
        action=action,
        uri=file_uri(info.name, rel),
        path=rel,
        source=info.name,
        hash=digest,
        concepts=_concepts(engine, info.name, rel),
        previous_uri=previous,
        warnings=_warnings(report, rel),
    )
