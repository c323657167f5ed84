"""PostgreSQL's one-sync-per-database lock: a session-level advisory lock on the server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine

from contextgraph.errors import DatabaseError, SyncInProgress
from contextgraph.store import nowrite

SYNC_LOCK_KEY = 0x63672D73796E63  # any 64-bit number; this one spells "cg-sync"


@contextmanager
def sync_lock(
    engine: Engine, *, wait: bool = True, waiting: Callable[[], object] | None = None
) -> Iterator[None]:
    """Hold PostgreSQL's one-sync-per-database lock: a session-level advisory lock.

    The lock lives on its own session (not a pooled connection, which would keep it after
    being returned), so the server frees it when the session ends, whatever killed the process.
    ``waiting`` paces the tries while another session holds it, or gives up by raising, as in
    SQLite's :func:`contextgraph.sync.lock.sync_lock`.
    """
    import psycopg

    # The URL's parts as the engine's own connections get them: a URL rendered back to text
    # lost its percent-encoding (a space in a database name or password), which psycopg
    # refuses, quoting the password in its message.
    args, params = engine.dialect.create_connect_args(engine.url)
    params = {**params, "autocommit": True, "application_name": "contextgraph-sync"}
    try:
        session = psycopg.connect(*args, **params)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}") from exc
    try:
        if wait and waiting is None:
            session.execute("SELECT pg_advisory_lock(%s)", (SYNC_LOCK_KEY,))
        else:
            while not _try_lock(session):
                if not wait:
                    nowrite.check("wait for another sync")
                    raise SyncInProgress("a sync is already running on this database")
                assert waiting is not None
                waiting()
        yield
    finally:
        session.close()  # ending the session releases the lock


def _try_lock(session: Any) -> bool:
    row = session.execute("SELECT pg_try_advisory_lock(%s)", (SYNC_LOCK_KEY,)).fetchone()
    return bool(row and row[0])
