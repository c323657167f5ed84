"""Engine set-up, pragmas, transactions and migrations.

Every transaction that may write starts with ``BEGIN IMMEDIATE``: a deferred transaction that reads
and then writes fails at once with "database is locked" when another writer holds the lock, whatever
the busy timeout, because SQLite cannot upgrade it without risking a deadlock. Read transactions
use a plain deferred ``BEGIN`` so they see one snapshot and never block writers (WAL mode).
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import URL, Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import StaticPool

from contextgraph.errors import CorruptDatabase, DatabaseError, ReadOnlyDatabase

log = logging.getLogger(__name__)

# The newest Alembic revision; tests/test_migrations.py checks it matches migrations/versions.
SCHEMA_HEAD = "0004_relation_weights"

_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


@dataclass
class LockStats:
    """How often and how long this process waited for the write lock (for soak reports)."""

    waits: int = 0
    seconds: list[float] | None = None

    def record(self, seconds: float) -> None:
        self.waits += 1
        if self.seconds is None:
            self.seconds = []
        self.seconds.append(seconds)


lock_stats = LockStats()
_stats_lock = threading.Lock()


MEMORY = ":memory:"


def database_url(path_or_url: str | os.PathLike[str]) -> URL:
    """Turn a file path or an SQLAlchemy URL into a URL; relative paths become absolute.

    A path is taken literally: ``50%.db``, ``a:b.db`` and ``my%20notes.db`` name exactly those
    files (no percent-decoding), and ``:memory:`` is an in-memory database.
    """
    raw = os.fspath(path_or_url)
    if not raw:
        raise DatabaseError("the database path is empty")
    if "://" in raw:
        return make_url(raw)
    if raw == MEMORY:
        return URL.create("sqlite", database=MEMORY)
    return URL.create("sqlite", database=str(Path(raw).expanduser().resolve()))


def is_memory(url: URL) -> bool:
    """Whether ``url`` names a private in-memory SQLite database."""
    name = url.database or ""
    return (
        not name
        or name == MEMORY
        or name.startswith("file::memory:")
        or url.query.get("mode") == "memory"
    )


def database_path(engine: Engine) -> Path | None:
    """Return the database file of a file-backed SQLite engine (None for in-memory)."""
    if is_memory(engine.url):
        return None
    name = engine.url.database or ""
    if engine.url.query.get("uri") == "true" and name.startswith("file:"):
        name = unquote(name[len("file:") :])
    return Path(name).resolve()


def is_read_only(engine: Engine) -> bool:
    """Whether the engine was opened read-only (the file or its folder cannot be written)."""
    return engine.url.query.get("mode") == "ro"


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create its ``-wal``/``-shm`` beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _read_only_url(path: Path) -> URL:
    # SQLite needs the -shm file to read a WAL database; in a folder it cannot write, it can only
    # read an existing -shm, else the file must be opened immutable (nobody can write it anyway).
    shm = path.with_name(path.name + "-shm")
    immutable = not os.access(path.parent, os.W_OK) and not shm.exists()
    query = {"uri": "true", "mode": "ro", **({"immutable": "1"} if immutable else {})}
    return URL.create("sqlite", database=f"file:{quote(str(path))}", query=query)


def make_engine(
    path_or_url: str | os.PathLike[str] | URL,
    *,
    busy_timeout_ms: int = 5000,
    create: bool = True,
) -> Engine:
    """Create an engine with WAL, a busy timeout, foreign keys and explicit transactions.

    With ``create=False`` a missing database file is an error (and nothing is created). A file
    this process cannot write is opened read-only: every read works, every write is refused.
    """
    url = path_or_url if isinstance(path_or_url, URL) else database_url(path_or_url)
    if url.get_backend_name() != "sqlite":
        raise DatabaseError(f"only SQLite databases are supported, not {url.get_backend_name()}")
    memory = is_memory(url)
    if not memory and url.query.get("uri") != "true":
        path = Path(url.database or "")
        if path.is_dir():
            raise DatabaseError(f"the database path {path} is a folder, not a file")
        if not path.exists():
            if not create:
                raise DatabaseError(f"no database at {path}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(
                    f"cannot create the database folder {path.parent}: {exc.strerror or exc}"
                ) from exc
        elif not _writable(path):
            url = _read_only_url(path)
    engine = create_engine(
        url,
        connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
        pool_pre_ping=False,
        # One in-memory database is one connection: migrations and queries must share it.
        **({"poolclass": StaticPool} if memory else {}),
    )
    read_only = is_read_only(engine)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's own handling is broken).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not read_only:  # switching the journal mode writes the header
                _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA temp_store = MEMORY")
            cursor.execute("PRAGMA wal_autocheckpoint = 20000")
            cursor.execute("PRAGMA cache_size = -131072")
        finally:
            cursor.close()
        _ensure_math_functions(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("contextgraph_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if mode else "BEGIN")

    _engines.add(engine)
    return engine


def _ensure_math_functions(dbapi_connection: sqlite3.Connection) -> None:
    """Register pow() and floor() where SQLite was built without its math functions."""
    try:
        dbapi_connection.execute("SELECT pow(2, 2), floor(1.5)").fetchone()
    except sqlite3.OperationalError:
        dbapi_connection.create_function("pow", 2, _pow, deterministic=True)
        dbapi_connection.create_function("floor", 1, _floor, deterministic=True)


def _pow(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else math.pow(x, y)


def _floor(x: float | None) -> float | None:
    return None if x is None else float(math.floor(x))


def _is_locked(exc: BaseException) -> bool:
    message = str(exc).lower()
    return "database is locked" in message or "database is busy" in message


def _retry_locked(fn: Any, *, deadline_seconds: float = 120.0) -> Any:
    start = time.monotonic()
    delay = 0.005
    while True:
        try:
            return fn()
        except (sqlite3.OperationalError, OperationalError) as exc:
            if not _is_locked(exc) or time.monotonic() - start > deadline_seconds:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


def _where(engine: Engine) -> str:
    path = database_path(engine)
    return "the in-memory database" if path is None else f"the database at {path}"


def translate(engine: Engine, exc: BaseException) -> BaseException:
    """Map a driver error to a one-line contextgraph error (never the SQL statement).

    Errors that are not about the database file itself come back unchanged.
    """
    orig = getattr(exc, "orig", None) or exc
    message = str(orig)
    lowered = message.lower()
    if "readonly database" in lowered or "read-only" in lowered:
        return ReadOnlyDatabase(f"{_where(engine)} is read-only: cannot write to it")
    if "file is not a database" in lowered or "malformed" in lowered:
        return CorruptDatabase(f"{_where(engine)} is damaged or not a database ({message})")
    if "unable to open database file" in lowered or "disk i/o error" in lowered:
        return DatabaseError(f"cannot open {_where(engine)} ({message})")
    return exc


@contextmanager
def _translated(engine: Engine) -> Iterator[None]:
    try:
        yield
    except (DBAPIError, sqlite3.Error) as exc:
        mapped = translate(engine, exc)
        if mapped is exc:
            raise
        raise mapped from exc


@contextmanager
def write(engine: Engine, *, retry_seconds: float = 120.0) -> Iterator[Connection]:
    """Open a ``BEGIN IMMEDIATE`` transaction, waiting (and retrying) while another writer works.

    The busy timeout already makes SQLite wait; on top of it we retry the BEGIN with backoff so a
    long writer elsewhere turns into a longer wait here, never into "database is locked".
    """
    if is_read_only(engine):
        raise ReadOnlyDatabase(f"{_where(engine)} is read-only: cannot write to it")
    with _translated(engine):
        conn = engine.connect().execution_options(contextgraph_write=True)
    try:
        start = time.monotonic()
        waited = False
        delay = 0.01
        while True:
            try:
                tx = conn.begin()
                break
            except OperationalError as exc:
                if not _is_locked(exc):
                    conn.rollback()
                    with _translated(engine):
                        raise
                if time.monotonic() - start > retry_seconds:
                    raise DatabaseError(
                        f"the database stayed locked by another writer for {retry_seconds:.0f} s"
                    ) from exc
                waited = True
                conn.rollback()
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        if waited or time.monotonic() - start > 0.05:
            with _stats_lock:
                lock_stats.record(time.monotonic() - start)
        with _translated(engine), tx:
            yield conn
    finally:
        conn.close()


@contextmanager
def read(engine: Engine, *, retry_seconds: float = 120.0) -> Iterator[Connection]:
    """Open a deferred read transaction: one consistent snapshot, never blocking writers."""
    with _translated(engine):
        conn = engine.connect()
    try:
        start = time.monotonic()
        delay = 0.01
        while True:
            try:
                tx = conn.begin()
                # A read transaction only takes its snapshot at the first read; do it now so a
                # transient busy (WAL recovery, checkpoint) is retried here, not mid-query.
                with _translated(engine):
                    conn.exec_driver_sql("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
                break
            except OperationalError as exc:
                conn.rollback()
                if not _is_locked(exc):
                    with _translated(engine):
                        raise
                if time.monotonic() - start > retry_seconds:
                    raise DatabaseError("the database could not be read: it stayed busy") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        with _translated(engine), tx:
            yield conn
    finally:
        conn.close()


def escape_like(value: str) -> str:
    """Escape ``%``, ``_`` and ``\\`` for a LIKE pattern used with ``escape="\\"``."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def migrations_dir() -> Path:
    """Find the Alembic scripts: inside the installed package, else beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise DatabaseError("the migration scripts are missing from this installation")


def alembic_config(engine: Engine) -> Any:
    """Build an Alembic Config bound to ``engine`` (scripts located from the package)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    # Config values go through ConfigParser interpolation: a literal '%' (``50%.db``) is '%%'.
    url = engine.url.render_as_string(hide_password=False)
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["engine"] = engine
    return cfg


def current_revision(engine: Engine) -> str | None:
    """Return the database's Alembic revision, or None for a blank database."""
    # One query on every open: a blank database has no alembic_version table at all.
    with read(engine) as conn:
        try:
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        except OperationalError as exc:
            if "no such table" in str(exc.orig):
                return None
            raise
        return None if row is None else str(row[0])


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``; a no-op (no Alembic import) when already at head."""
    current = current_revision(engine)
    if revision == "head" and current == SCHEMA_HEAD:
        return
    if is_read_only(engine):
        raise ReadOnlyDatabase(
            f"{_where(engine)} is read-only and its schema ({current or 'blank'}) is not at "
            f"{SCHEMA_HEAD}: it cannot be upgraded"
        )
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), revision)
    except DBAPIError as exc:
        mapped = translate(engine, exc)
        if mapped is not exc:
            raise mapped from exc
        raise DatabaseError(f"migrating the database failed: {exc.orig}") from exc


def downgrade(engine: Engine, revision: str) -> None:
    """Revert migrations down to ``revision`` (``base`` empties the schema)."""
    from alembic import command

    command.downgrade(alembic_config(engine), revision)


def _dispose_after_fork() -> None:
    # A connection must never cross a fork: drop the inherited pools without closing the
    # parent's sockets/handles (close=False), so the child opens its own connections.
    for engine in list(_engines):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_dispose_after_fork)
