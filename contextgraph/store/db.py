"""Engine set-up, pragmas, transactions and migrations.

Every transaction that may write starts with ``BEGIN IMMEDIATE``: a deferred transaction that reads
and then writes fails at once with "database is locked" when another writer holds the lock, whatever
the busy timeout, because SQLite cannot upgrade it without risking a deadlock. Read transactions
use a plain deferred ``BEGIN`` so they see one snapshot and never block writers (WAL mode).

On PostgreSQL the same two kinds of transaction exist: a write transaction first takes a
transaction-level advisory lock (writers run one at a time, as SQLite's do, so no two of our
writers can deadlock or see each other's half-done batches), and a read transaction is
``REPEATABLE READ READ ONLY`` (one snapshot, never blocking a writer). Serialization failures and
deadlocks (from other clients of the server) are retried by :func:`run_write`. One sync per
database is a session-level advisory lock (:func:`contextgraph.store.pglock.sync_lock`), freed
by the server when the session ends however the process died.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from sqlalchemy import (
    URL,
    Connection,
    Engine,
    column,
    create_engine,
    event,
    select,
    table,
)
from sqlalchemy.engine import RootTransaction, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import StaticPool

from contextgraph.errors import CorruptDatabase, DatabaseError, InvalidArgument, ReadOnlyDatabase
from contextgraph.store import head, nowrite
from contextgraph.store.backoff import with_backoff
from contextgraph.store.dialect import ensure_math_functions
from contextgraph.store.ownership import refuse_foreign, refuse_foreign_file, wal_wanted

log = logging.getLogger(__name__)

# The newest Alembic revision (a light module: contextgraph.sync.unchanged reads it too).
SCHEMA_HEAD = head.SCHEMA_HEAD

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
MMAP_BYTES = 256 * 1024 * 1024  # per connection: SQLite maps at most this much of the file
CACHE_KIB = 16 * 1024  # per connection: the page cache (PRAGMA cache_size, in KiB)


def database_url(path_or_url: str | os.PathLike[str]) -> URL:
    """Turn a file path or an SQLAlchemy URL into a URL; relative paths become absolute.

    A path is taken literally: ``50%.db``, ``a:b.db`` and ``my%20notes.db`` name exactly those
    files (no percent-decoding), and ``:memory:`` is an in-memory database.
    """
    raw = os.fspath(path_or_url)
    if not raw:
        raise DatabaseError("the database path is empty")
    if "://" in raw:
        try:
            return make_url(raw)
        except ValueError as exc:  # a port that is no number; the URL (a password) not quoted
            raise DatabaseError(f"invalid database URL: {exc}") from None
    if raw == MEMORY:
        return URL.create("sqlite", database=MEMORY)
    path = Path(raw)
    if raw == "~" or raw.startswith("~/"):  # ``~name`` is a file's name, not a user's home
        path = path.expanduser()  # (launch.database_key, which may import nothing, the same)
    return URL.create("sqlite", database=str(path.resolve()))


def is_memory(url: URL) -> bool:
    """Whether ``url`` names a private in-memory SQLite database (a server's URL never does:
    one without a database name reaches the server's default database)."""
    if url.get_backend_name() != "sqlite":
        return False
    name = url.database or ""
    return (
        not name
        or name == MEMORY
        or name.startswith("file::memory:")
        or url.query.get("mode") == "memory"
    )


def database_path(engine: Engine) -> Path | None:
    """Return the database file of a file-backed SQLite engine (None for in-memory or a server)."""
    if engine.url.get_backend_name() != "sqlite" or is_memory(engine.url):
        return None
    name = engine.url.database or ""
    if engine.url.query.get("uri") == "true" and name.startswith("file:"):
        name = os.fsdecode(unquote_to_bytes(name[len("file:") :]))
    return Path(name).resolve()


def file_identity(path: Path) -> tuple[Path, int, int]:
    """(path, device, inode) of the database file at ``path``, for :func:`gone_from`."""
    st = os.stat(path)
    return path, st.st_dev, st.st_ino


def gone_from(identity: tuple[Path, int, int]) -> str | None:
    """``"removed"`` or ``"replaced"`` once the file known as ``identity`` is no longer at its
    path; None while it is. An error other than a missing file is raised (cannot tell)."""
    path, device, inode = identity
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "removed"
    return None if (st.st_dev, st.st_ino) == (device, inode) else "replaced"


def is_read_only(engine: Engine) -> bool:
    """Whether the engine was opened read-only (the file or its folder cannot be written)."""
    return engine.url.query.get("mode") == "ro"


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create its ``-wal``/``-shm`` beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def opens_writable(path: Path) -> bool:
    """Whether :func:`make_engine` would open the file at ``path`` for writing now (a resident
    server reopens its database when this changes)."""
    return _writable(path)


def _read_only_url(path: Path) -> URL:
    # SQLite needs the -shm file to read a WAL database; in a folder it cannot write, it can only
    # read an existing -shm, else the file must be opened immutable (nobody can write it anyway).
    # Immutable, SQLite reads no -wal: one left by a crash would hold committed transactions
    # that every answer would miss, so such a database is refused rather than misread.
    shm = path.with_name(path.name + "-shm")
    immutable = not os.access(path.parent, os.W_OK) and not shm.exists()
    if immutable and _size(path.with_name(path.name + "-wal")) > 0:
        raise DatabaseError(
            f"the database at {path} has a write-ahead log ({path.name}-wal) and no -shm in a "
            "folder this process cannot write: the log cannot be read here; open it once where "
            "its folder is writable"
        )
    query = {"uri": "true", "mode": "ro", **({"immutable": "1"} if immutable else {})}
    # The path's bytes, percent-quoted: a name that is not UTF-8 cannot be encoded as text.
    return URL.create("sqlite", database=f"file:{quote(os.fsencode(path))}", query=query)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
    if url.get_backend_name() == "postgresql":
        from contextgraph.store.pgengine import make_pg_engine

        engine = make_pg_engine(url, busy_timeout_ms=busy_timeout_ms)
        _engines.add(engine)
        return engine
    if url.get_backend_name() != "sqlite":
        raise DatabaseError(
            f"only SQLite and PostgreSQL databases are supported, not {url.get_backend_name()}"
        )
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
        elif not path.is_file():  # a device or a named pipe: SQLite would make a -journal beside it
            raise DatabaseError(f"the database path {path} is not a regular file")
        else:
            refuse_foreign_file(path, f"the database at {path}", busy_timeout_ms / 1000)
            if not _writable(path):
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
            # Switching the journal mode writes the header: never in another program's file.
            if not read_only and _retry_locked(lambda: wal_wanted(cursor)):
                _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA temp_store = MEMORY")
            cursor.execute("PRAGMA wal_autocheckpoint = 20000")
            # 16 MiB of pages per connection. Reads barely use it (they come through mmap,
            # below); a large cache only made a long write keep every page it ever touched in
            # fresh memory: at 128 MiB a cold load of 13,415 notes spent 0.25 s more of the
            # writer's CPU, zeroing new pages for the kernel (scripts/ab.py --cold).
            cursor.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            # Reads come straight from the OS's page cache instead of a copy per page: a
            # whole-table scan of files (what a sync compares, what stats counts) costs a
            # third. Writes still go through the WAL, as before.
            cursor.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        finally:
            cursor.close()
        ensure_math_functions(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if not options.get("contextgraph_write", False):
            conn.exec_driver_sql("BEGIN")
            return
        # Outside a transaction SQLite takes the switch; inside one it would ignore it. Every
        # write sets it, so a connection a cold load left without checks gets them back.
        checks = "ON" if options.get("contextgraph_foreign_keys", True) else "OFF"
        conn.exec_driver_sql(f"PRAGMA foreign_keys = {checks}")
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    _engines.add(engine)
    return engine


# SQLSTATEs a writer retries: serialization_failure, deadlock_detected.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})


def _sqlstate(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", exc)
    state = getattr(orig, "sqlstate", None)
    return None if state is None else str(state)


def is_retryable(exc: BaseException) -> bool:
    """True for a PostgreSQL serialization failure or deadlock: retrying the transaction helps."""
    return _sqlstate(exc) in _RETRY_SQLSTATES


def run_write(
    engine: Engine, fn: Any, *, retry_seconds: float = 120.0, foreign_keys: bool = True
) -> Any:
    """Run ``fn(conn)`` in a write transaction, retrying it on serialization failures/deadlocks.

    On SQLite this is exactly one :func:`write` (its writers never deadlock). ``fn`` must have
    no side effects outside the transaction, since it may run more than once.
    """

    def attempt() -> Any:
        with write(engine, retry_seconds=retry_seconds, foreign_keys=foreign_keys) as conn:
            return fn(conn)

    def before_sleep(exc: BaseException) -> None:
        log.info("retrying a write after %s", _sqlstate(exc))

    return with_backoff(
        attempt,
        (OperationalError, DBAPIError),
        is_retryable,
        retry_seconds,
        cap=0.5,
        before_sleep=before_sleep,
    )


def _is_locked(exc: BaseException) -> bool:
    message = str(exc).lower()
    return "database is locked" in message or "database is busy" in message


def _retry_locked(fn: Callable[[], Any], *, deadline_seconds: float = 120.0) -> Any:
    return with_backoff(
        fn, (sqlite3.OperationalError, OperationalError), _is_locked, deadline_seconds, first=0.005
    )


def check_writable(engine: Engine, what: str) -> None:
    """Raise :class:`ReadOnlyDatabase` ("... is read-only: cannot <what>") for a database
    opened read-only: before a write begins, and before anything else it would change."""
    if is_read_only(engine):
        raise ReadOnlyDatabase(f"{_where(engine)} is read-only: cannot {what}")


def _where(engine: Engine) -> str:
    if engine.url.get_backend_name() != "sqlite":
        return f"the database {engine.url}"  # str() of a URL hides its password
    path = database_path(engine)
    return "the in-memory database" if path is None else f"the database at {path}"


def translate(engine: Engine, exc: BaseException) -> BaseException:
    """Map a driver error to a one-line contextgraph error (never the SQL statement).

    Errors that are not about the database file itself come back unchanged.
    """
    orig = getattr(exc, "orig", None) or exc
    message = str(orig)
    if engine.url.get_backend_name() == "postgresql":
        return _translate_pg(engine, exc)
    lowered = message.lower()
    if "readonly database" in lowered or "read-only" in lowered:
        return ReadOnlyDatabase(f"{_where(engine)} is read-only: cannot write to it")
    if "file is not a database" in lowered or "malformed" in lowered:
        return CorruptDatabase(f"{_where(engine)} is damaged or not a database ({message})")
    if "unable to open database file" in lowered or "disk i/o error" in lowered:
        return DatabaseError(f"cannot open {_where(engine)} ({message})")
    return exc


# SQLSTATE classes of a server that cannot be reached or entered: connection exceptions (08),
# invalid authorization (28), no such database (3D000).
_PG_CANNOT_OPEN = ("08", "28", "3D")


def _translate_pg(engine: Engine, exc: BaseException) -> BaseException:
    orig = getattr(exc, "orig", None) or exc
    state = _sqlstate(exc) or ""
    first = (str(orig).strip().splitlines() or ["?"])[0]
    reached = state and not state.startswith(_PG_CANNOT_OPEN)
    if (
        not reached
        and isinstance(exc, OperationalError | DBAPIError)
        and (state or "connect" in first.lower() or "server" in first.lower())
    ):
        return DatabaseError(f"cannot open {_where(engine)} ({first})")
    if state == "42P01":  # undefined_table: opening migrated it, so it was emptied since
        return DatabaseError(
            f"{_where(engine)} lost contextgraph's tables while this process ran ({first}); "
            "was it dropped and created again? Restart to create them"
        )
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
def write(
    engine: Engine, *, retry_seconds: float = 120.0, foreign_keys: bool = True
) -> Iterator[Connection]:
    """Open a ``BEGIN IMMEDIATE`` transaction, waiting (and retrying) while another writer works.

    The busy timeout already makes SQLite wait; on top of it we retry the BEGIN with backoff so a
    long writer elsewhere turns into a longer wait here, never into "database is locked".

    ``foreign_keys=False`` turns SQLite's foreign-key checks off for this one transaction: only
    for a writer whose rows refer to nothing but rows it wrote itself or that no other writer
    may delete meanwhile (a cold load's batches, contextgraph/sync/coldload.py). Each check is
    an index lookup per inserted row and key (PostgreSQL keeps its checks).
    """
    check_writable(engine, "write to it")
    nowrite.check("write")
    with _translated(engine):
        conn = engine.connect().execution_options(
            contextgraph_write=True,
            contextgraph_wait=retry_seconds,
            contextgraph_foreign_keys=foreign_keys,
        )
    locked_for = f"the database stayed locked by another writer for {retry_seconds:.0f} s"
    waited = False

    def begin() -> RootTransaction:
        try:
            return conn.begin()
        except OperationalError as exc:
            if _sqlstate(exc) == "55P03":  # PostgreSQL: lock_timeout while waiting
                raise DatabaseError(locked_for) from exc
            if not _is_locked(exc):
                conn.rollback()
                with _translated(engine):
                    raise
            raise

    def before_sleep(_exc: BaseException) -> None:
        nonlocal waited
        waited = True
        conn.rollback()

    try:
        start = time.monotonic()
        tx = with_backoff(
            begin,
            (OperationalError,),
            _is_locked,
            retry_seconds,
            before_sleep=before_sleep,
            gave_up=lambda _exc: DatabaseError(locked_for),
        )
        if waited or time.monotonic() - start > 0.05:
            with _stats_lock:
                lock_stats.record(time.monotonic() - start)
        with _translated(engine), tx:
            yield conn
    finally:
        conn.close()


_SNAPSHOT_PROBE = {"sqlite": "SELECT 1 FROM sqlite_master LIMIT 1", "postgresql": "SELECT 1"}


@contextmanager
def read(engine: Engine, *, retry_seconds: float = 120.0) -> Iterator[Connection]:
    """Open a deferred read transaction: one consistent snapshot, never blocking writers."""
    with _translated(engine):
        conn = engine.connect()

    def begin() -> RootTransaction:
        try:
            tx = conn.begin()
            # A read transaction only takes its snapshot at the first read; do it now so a
            # transient busy (WAL recovery, checkpoint) is retried here, not mid-query.
            with _translated(engine):
                conn.exec_driver_sql(_SNAPSHOT_PROBE[conn.dialect.name]).fetchall()
        except OperationalError as exc:
            conn.rollback()
            if not _is_locked(exc):
                with _translated(engine):
                    raise
            raise
        return tx

    try:
        tx = with_backoff(
            begin,
            (OperationalError,),
            _is_locked,
            retry_seconds,
            gave_up=lambda _exc: DatabaseError("the database could not be read: it stayed busy"),
        )
        with _translated(engine), tx:
            yield conn
    finally:
        conn.close()


def escape_like(value: str) -> str:
    """Escape ``%``, ``_`` and ``\\`` for a LIKE pattern used with ``escape="\\"``."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def migrations_dir() -> Path:
    """The Alembic scripts, shipped inside the package (``contextgraph/store/migrations``)."""
    here = Path(__file__).resolve().parent / "migrations"
    if not (here / "env.py").is_file():
        raise DatabaseError("the migration scripts are missing from this installation")
    return here


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
    from contextgraph.store.dialect import has_table

    with read(engine) as conn:
        if not has_table(conn, "alembic_version"):
            return None
        version = table("alembic_version", column("version_num"))
        row = conn.execute(select(version.c.version_num)).first()
        return None if row is None else str(row[0])


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to ``revision``; a no-op (no Alembic import) when already at head,
    and a blank SQLite file's head schema comes without Alembic (:mod:`.blank`)."""
    current = current_revision(engine)
    if revision == "head" and current == SCHEMA_HEAD:
        return
    if not revision.strip():
        raise InvalidArgument("give a schema revision (or head)")
    with read(engine) as conn:
        refuse_foreign(conn, _where(engine))  # before anything is written to it
    if is_read_only(engine):
        raise ReadOnlyDatabase(
            f"{_where(engine)} is read-only and its schema ({current or 'blank'}) is not at "
            f"{SCHEMA_HEAD}: it cannot be upgraded"
        )
    if revision == "head" and current is None and engine.url.get_backend_name() == "sqlite":
        from contextgraph.store import blank

        try:  # in BEGIN IMMEDIATE: a second opener waits, then finds the schema made
            with write(engine) as conn:
                if blank.create(conn, SCHEMA_HEAD):
                    return
        except DBAPIError as exc:
            raise _migration_error(engine, exc) from exc
    from alembic import command
    from alembic.util import CommandError

    try:
        command.upgrade(alembic_config(engine), revision)
    except CommandError as exc:  # an unknown or malformed target revision
        raise DatabaseError(f"cannot upgrade to {revision[:64]!r}: {exc}") from None
    except DBAPIError as exc:
        raise _migration_error(engine, exc) from exc


def _migration_error(engine: Engine, exc: DBAPIError) -> BaseException:
    mapped = translate(engine, exc)
    return DatabaseError(f"migrating the database failed: {exc.orig}") if mapped is exc else mapped


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
