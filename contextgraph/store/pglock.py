"""PostgreSQL's one-sync-per-database lock: a session-level advisory lock on the server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Engine

from contextgraph.errors import DatabaseError, SyncInProgress
from contextgraph.store import nowrite

SYNC_LOCK_KEY = 0x63672D73796E63  # any 64-bit number; this one spells "cg-sync"
WATCH_LOCK_KEY = 0x63672D7761746368  # one watcher per database: "cg-watch"
# The session holding the sync lock for the sync running in this thread (or task), if any.
_holding: ContextVar[Any | None] = ContextVar("contextgraph_sync_lock_session", default=None)


@contextmanager
def sync_lock(
    engine: Engine, *, wait: bool = True, waiting: Callable[[], object] | None = None
) -> Iterator[None]:
    """Hold PostgreSQL's one-sync-per-database lock: a session-level advisory lock.

    The lock lives on its own session (not a pooled connection, which would keep it after
    being returned), so the server frees it when the session ends, whatever killed the process.
    ``waiting`` paces the tries while another session holds it, or gives up by raising, as in
    SQLite's :func:`contextgraph.sync.lock.sync_lock`.

    That session sits idle while the sync works, so the server's ``idle_session_timeout`` is
    turned off for it; a session ended anyway (``pg_terminate_backend``, a lost connection)
    takes the lock with it, and each write transaction of the sync then checks it still holds
    the lock (:func:`check_held`) rather than go on beside another sync.
    """
    session = _session(engine, "contextgraph-sync")
    try:
        if wait and waiting is None:
            session.execute("SELECT pg_advisory_lock(%s)", (SYNC_LOCK_KEY,))
        else:
            while not _try_lock(session, SYNC_LOCK_KEY):
                if not wait:
                    nowrite.check("wait for another sync")
                    raise SyncInProgress("a sync is already running on this database")
                assert waiting is not None
                waiting()
        token = _holding.set(session)
        try:
            yield
        finally:
            _holding.reset(token)
            _release(session)
    finally:
        session.close()  # ending the session releases the lock, once the server sees it end


def _release(session: Any) -> None:
    """Unlock now: a sync waiting for the lock takes it at its next try, not after the server
    has noticed the session end. A session already ended (the lock went with it) has nothing
    to unlock."""
    import psycopg

    if session.broken:
        return
    try:
        session.execute("SELECT pg_advisory_unlock(%s)", (SYNC_LOCK_KEY,))
    except psycopg.OperationalError:  # the session ended meanwhile, and the lock with it
        return


def check_held() -> None:
    """Raise :class:`DatabaseError` if the sync running here has lost its lock: its session
    ended, which frees the lock for another sync. A session still open holds it."""
    session = _holding.get()
    if session is None:
        return
    import psycopg

    try:
        session.execute("SELECT 1")
    except psycopg.Error as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseError(
            f"this sync lost its lock on the database (its server session ended: {why}); "
            "it stopped after its last whole batch: sync again"
        ) from exc


@contextmanager
def watch_lock(engine: Engine) -> Iterator[Callable[[], bool]]:
    """The one-watcher-per-database lock: yields its try (True once held); a session-level
    advisory lock on a session of its own, freed when the block ends or the session does."""
    session = _session(engine, "contextgraph-watch")
    try:
        yield lambda: _try_lock(session, WATCH_LOCK_KEY)
    finally:
        session.close()


def _session(engine: Engine, name: str) -> Any:
    """A session of its own on ``engine``'s database (autocommit, named ``name``), which the
    server keeps however long it idles: a lock held there lasts as long as the session."""
    import psycopg

    # The URL's parts as the engine's own connections get them: a URL rendered back to text
    # lost its percent-encoding (a space in a database name or password), which psycopg
    # refuses, quoting the password in its message.
    args, params = engine.dialect.create_connect_args(engine.url)
    params = {**params, "autocommit": True, "application_name": name}
    try:
        session = psycopg.connect(*args, **params)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}") from exc
    if session.info.server_version >= 140000:  # the setting is new in PostgreSQL 14
        session.execute("SET idle_session_timeout = 0")
    return session


def _try_lock(session: Any, key: int) -> bool:
    row = session.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])
