"""Walk a source folder: which files are notes, code or configs, and which can't be taken."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from contextgraph.code import CODE_EXTENSIONS, CONFIG_FILENAMES

NOTE_EXTENSIONS = frozenset({".md"})
SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "venv", "env", "site-packages", "bower_components"}
)


@dataclass(frozen=True)
class ScannedFile:
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


def file_kind(name: str) -> str | None:
    """Classify a file name as note, code or config (None: not ours)."""
    if name in CONFIG_FILENAMES:
        return "config"
    suffix = os.path.splitext(name)[1].lower()
    if suffix in NOTE_EXTENSIONS:
        return "note"
    if suffix in CODE_EXTENSIONS:
        return "code"
    return None


def scan(root: Path, *, exclude: Iterable[Path] = ()) -> ScanResult:
    """List the notes, code files and configs under ``root``.

    Skips hidden entries, dependency and cache folders, virtual environments and the ``exclude``d
    paths (the database and its -wal/-shm). Symlinks are followed only while their target stays
    inside the root, and each real folder is walked once, so loops end.
    """
    result = ScanResult()
    real_root = Path(os.path.realpath(root))
    excluded = {os.path.realpath(p) for p in exclude}
    excluded_names = {os.path.basename(p) for p in excluded}
    seen_dirs: set[str] = set()
    stack: list[tuple[str, str]] = [(str(real_root), "")]
    while stack:
        directory, rel_dir = stack.pop()
        real_dir = os.path.realpath(directory)
        if real_dir in seen_dirs:
            continue
        seen_dirs.add(real_dir)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            result.problems.append((rel_dir or ".", f"cannot list folder: {exc.strerror or exc}"))
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name.startswith("."):
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                result.problems.append(
                    (rel.encode("utf-8", "replace").decode(), "file name is not valid UTF-8")
                )
                continue
            try:
                is_link = entry.is_symlink()
                if is_link:
                    target = os.path.realpath(entry.path)
                    if not _inside(target, str(real_root)):
                        continue  # never follow a link out of the source
                    st = os.stat(entry.path)
                else:
                    target = entry.path
                    st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # dangling link, or vanished since the listing
            if stat.S_ISDIR(st.st_mode):
                if name in SKIPPED_DIRS or os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    continue
                subdirs.append((entry.path, rel))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            kind = file_kind(name)
            if kind is None:
                continue
            if name in excluded_names and os.path.realpath(entry.path) in excluded:
                continue
            result.files.append(ScannedFile(rel, entry.path, kind, st.st_size, st.st_mtime_ns))
        stack.extend(reversed(subdirs))
    result.files.sort(key=lambda f: f.path)
    return result


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
