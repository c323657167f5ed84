"""Walk a source folder: which files are notes, code or configs, and which can't be taken."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import NamedTuple

from contextgraph.code.kinds import CODE_EXTENSIONS, CONFIG_FILENAMES

NOTE_EXTENSIONS = frozenset({".md"})
# Dependency and cache folders, by name. A virtual environment is known by its pyvenv.cfg, not
# its name: a folder of notes may well be called ``env`` or ``venv``.
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "bower_components"})
# suffix -> kind, for the walk's per-file test (file_kind's rules, one dict lookup)
_KIND_OF_SUFFIX = {
    **{suffix: "code" for suffix in CODE_EXTENSIONS},
    **{suffix: "note" for suffix in NOTE_EXTENSIONS},
}
_by_name = attrgetter("name")
_by_path = itemgetter(0)
_new_tuple = tuple.__new__  # a ScannedFile without NamedTuple's Python-level __new__ (half cost)


class ScannedFile(NamedTuple):
    """A candidate file: its source-relative posix path and the stat that change detection uses."""

    path: str
    abspath: str
    kind: str  # note | code | config
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: list[ScannedFile] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    linked: bool = False  # a symlink inside the root was followed (a file may have two paths)


def file_kind(name: str) -> str | None:
    """Classify a file name as note, code or config (None: not ours)."""
    if name in CONFIG_FILENAMES:
        return "config"
    # os.path.splitext's suffix (a name of dots and one suffix has none), without its cost
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 and name[:dot].strip(".") else ""
    if suffix in NOTE_EXTENSIONS:
        return "note"
    if suffix in CODE_EXTENSIONS:
        return "code"
    return None


def scan(
    root: Path,
    *,
    exclude: Iterable[Path] = (),
    once_found: tuple[int, Callable[[], object]] | None = None,
) -> ScanResult:
    """List the notes, code files and configs under ``root``.

    Skips hidden entries, dependency and cache folders, virtual environments and the ``exclude``d
    paths (the database and its -wal/-shm). Symlinks are followed only while their target stays
    inside the root, and each real folder is walked once, so loops end.

    ``once_found`` = (count, call): ``call()`` once the walk has found ``count`` files (checked
    after each folder), while it goes on; a sync starts its extraction's workers so.
    """
    result = ScanResult()
    count, notify = once_found or (0, None)
    real_root = Path(os.path.realpath(root))
    excluded = {os.path.realpath(p) for p in exclude}
    excluded_names = {os.path.basename(p) for p in excluded}
    seen_dirs: set[str] = set()
    # (path to list, source-relative path, real path): a folder's real path is its parent's
    # and its name unless it is a link (realpath per folder made depth quadratic: 960 levels
    # took 6 s).
    stack: list[tuple[str, str, str]] = [(str(real_root), "", str(real_root))]
    while stack:
        directory, rel_dir, real_dir = stack.pop()
        if real_dir in seen_dirs:
            continue
        seen_dirs.add(real_dir)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=_by_name)
        except OSError as exc:
            result.problems.append((rel_dir or ".", f"cannot list folder: {exc.strerror or exc}"))
            continue
        subdirs: list[tuple[str, str, str]] = []
        prefix = f"{rel_dir}/" if rel_dir else ""
        files = result.files
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            try:
                if entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if not inside(target, str(real_root)):
                        continue  # never follow a link out of the source
                    result.linked = True
                    st = os.stat(entry.path)
                    is_dir = stat.S_ISDIR(st.st_mode)
                    real_path: str | None = target
                else:
                    real_path = None  # a folder's: its parent's real path and its name
                    # The type comes with the listing: only a file of ours needs its own stat.
                    is_dir = entry.is_dir(follow_symlinks=False)
                    st = None
            except PermissionError as exc:  # a folder that may be listed but not searched
                result.problems.append((_shown(prefix + name), f"cannot stat: {exc.strerror}"))
                continue
            except OSError:
                continue  # dangling link, or vanished since the listing
            if is_dir:
                if name in SKIPPED_DIRS or os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    continue
                if not name.isascii() and not _is_utf8(name):  # the folder's part passed already
                    result.problems.append(
                        (_shown(prefix + name), "folder name is not valid UTF-8")
                    )
                    continue
                real = real_path or os.path.join(real_dir, name)
                subdirs.append((entry.path, prefix + name, real))
                continue
            # file_kind(name) inline, as this runs for every file of every sync. The name does
            # not start with a dot, so a dot past its start always leaves a stem.
            kind: str | None = "config"
            if name not in CONFIG_FILENAMES:
                dot = name.rfind(".")
                kind = _KIND_OF_SUFFIX.get(name[dot:].lower()) if dot > 0 else None
                if kind is None:
                    continue
            if not name.isascii() and not _is_utf8(name):  # only files of ours are reported
                result.problems.append((_shown(prefix + name), "file name is not valid UTF-8"))
                continue
            if st is None:
                try:
                    st = entry.stat(follow_symlinks=False)
                except PermissionError as exc:
                    result.problems.append((prefix + name, f"cannot stat: {exc.strerror}"))
                    continue
                except OSError:
                    continue  # vanished since the listing
            if not stat.S_ISREG(st.st_mode):
                continue
            if name in excluded_names and os.path.realpath(entry.path) in excluded:
                continue
            found = (prefix + name, entry.path, kind, st.st_size, st.st_mtime_ns)
            files.append(_new_tuple(ScannedFile, found))
        stack.extend(reversed(subdirs))
        if notify is not None and len(files) >= count:
            notify()
            notify = None
    result.files.sort(key=_by_path)
    return result


class _Enough(Exception):
    """Ends a walk of :func:`holds_at_least` that has found what it looked for."""


def holds_at_least(roots: Iterable[Path], count: int) -> bool:
    """True if the walks of ``roots`` (as :func:`scan` walks them) find ``count`` files; each
    walk stops once the files found reach ``count``."""

    def enough() -> None:
        raise _Enough

    found = 0
    for root in roots:
        if found >= count:
            break
        try:
            found += len(scan(root, once_found=(count - found, enough)).files)
        except _Enough:
            return True
    return found >= count


def _is_utf8(name: str) -> bool:
    """False for a name holding surrogate escapes (bytes that were not UTF-8)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str) -> str:
    """``path`` as a report can hold it: each byte that was not UTF-8 becomes ``?``."""
    return path if _is_utf8(path) else path.encode("utf-8", "replace").decode()


def inside(path: str, root: str) -> bool:
    """Whether the real path ``path`` is the folder ``root`` (a real path too) or lies in it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def pick(
    root: Path, paths: list[str], exclude: list[Path]
) -> tuple[list[ScannedFile], list[str]] | None:
    """The files among ``paths`` a full scan would take, and every path asked about.

    None when a full sync is needed instead (a folder, or a symlinked folder on the way).
    """
    real_root = os.path.realpath(root)
    excluded = {os.path.realpath(p) for p in exclude}
    files: list[ScannedFile] = []
    for rel in paths:
        if os.path.basename(rel) == "pyvenv.cfg":
            return None  # a folder becomes a virtual environment, or stops being one: walk it
        abspath = os.path.join(real_root, rel)
        parent = os.path.dirname(rel)
        folder = os.path.dirname(abspath)
        expected = os.path.join(real_root, parent).rstrip(os.sep)
        if os.path.isdir(abspath) or (
            os.path.lexists(folder) and os.path.realpath(folder) != expected
        ):
            return None
        kind = file_kind(os.path.basename(rel))
        if kind is None and not os.path.lexists(abspath):
            return None  # perhaps a folder that was deleted or moved away: walk the source
        if not scannable(real_root, rel) or os.path.realpath(abspath) in excluded:
            continue
        try:
            target = os.path.realpath(abspath)
            st = os.stat(abspath)
        except OSError:
            continue  # gone (or a dangling link): retracted below if the store has it
        if kind is None or not stat.S_ISREG(st.st_mode):
            continue
        if not inside(target, real_root):
            continue  # a link out of the source: never followed
        files.append(ScannedFile(rel, abspath, kind, st.st_size, st.st_mtime_ns))
    return files, paths


def scannable(real_root: str, rel: str) -> bool:
    """Whether the walk of :func:`scan` would enter every folder on the way to ``rel``."""
    parts = rel.split("/")
    if any(p.startswith(".") or not p for p in parts):
        return False
    folders = parts[:-1]
    for i, name in enumerate(folders):
        if name in SKIPPED_DIRS:
            return False
        if os.path.exists(os.path.join(real_root, *folders[: i + 1], "pyvenv.cfg")):
            return False
    return True
