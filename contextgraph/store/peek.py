"""Read an SQLite file to judge it, changing nothing in it.

Standard library only: the CLI's no-change sync (:mod:`contextgraph.sync.unchanged`) asks
before SQLAlchemy loads, and :func:`contextgraph.store.ownership.refuse_foreign_file` before
the engine opens the file. A read-only connection never writes the database file, never copies
a ``-wal`` into it, and never switches its journal mode.

It does make the ``-wal`` and ``-shm`` files beside a file in WAL mode that has none: SQLite's
reader needs them. Reading such a file as ``immutable`` would make nothing, but it is not safe:
with it, the same process's next read-write connections to the file met "database disk image
is malformed" (tests/test_concurrency.py's readers during a sync).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from contextgraph.store.identity import nonblocking

_MAGIC = b"SQLite format 3\x00"
_WAL = b"\x02\x02"  # bytes 18-19, the file format's write and read versions: 2 is WAL


def read_only_uri(path: Path) -> str:
    """The URI of a read-only connection to ``path`` (any bytes in its name)."""
    return f"file:{quote(os.fsencode(path))}?mode=ro"


def in_wal_mode(path: Path) -> bool:
    """Whether ``path`` holds an SQLite database whose header says WAL mode (False for
    anything else, and for a file that cannot be read)."""
    try:
        with open(path, "rb", opener=nonblocking) as handle:  # never waits on a named pipe
            header = handle.read(100)
    except OSError:
        return False
    return len(header) == 100 and header.startswith(_MAGIC) and header[18:20] == _WAL


__all__ = ["in_wal_mode", "read_only_uri"]
