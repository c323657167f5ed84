"""Write a note's file all at once, durably, in a folder a sync reads (SPEC §14).

The bytes go to a hidden temporary file beside the note, synced, then renamed over it, so a
reader (an editor, a sync) sees the old file or the new one, never a part. A write killed
before its rename leaves that temporary file; the next write into the folder removes it once
it is old enough to be no running write's (:func:`atomic_write`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time


def atomic_write(target: str, data: bytes) -> None:
    """Replace ``target`` with ``data`` all at once: a reader sees the old file or the new one."""
    folder = os.path.dirname(target)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()  # what open() would give a new file
    _sweep(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_folder(folder)


_TMP_PREFIX, _TMP_SUFFIX = ".contextgraph-", ".tmp"
LEFTOVER_SECONDS = 600.0  # a write's temporary file older than this was left by a killed one


def _sweep(folder: str) -> None:
    """Remove the temporary files of writes into ``folder`` that were killed (SIGKILL, or
    SIGTERM, which ends a CLI run at once) before they could: hidden, no sync ever sees them."""
    cutoff = time.time() - LEFTOVER_SECONDS
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX):
                    with contextlib.suppress(OSError):  # gone already, or not ours to remove
                        if (
                            entry.is_file(follow_symlinks=False)
                            and entry.stat(follow_symlinks=False).st_mtime < cutoff
                        ):
                            os.unlink(entry.path)
    except OSError:
        return  # the write itself reports what is wrong with the folder


def _umask() -> int:
    """This process's umask: read from ``/proc`` where Linux tells it, else set and put back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass  # no /proc: ask os.umask below
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_folder(folder: str) -> None:
    """Make a rename or unlink in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename itself already happened
    finally:
        os.close(fd)


__all__ = ["LEFTOVER_SECONDS", "atomic_write", "fsync_folder"]
