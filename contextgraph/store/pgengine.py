"""The engine of a PostgreSQL database (SPEC §15): psycopg 3, a pool, our two transaction kinds.

A write transaction takes the writers' advisory lock first (one writer at a time, as on SQLite);
a read is a ``REPEATABLE READ READ ONLY`` snapshot. :func:`contextgraph.store.db.make_engine`
calls :func:`make_pg_engine` for a ``postgresql://`` URL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event

from contextgraph.errors import DatabaseError
from contextgraph.store.pglock import check_held

# The writers' advisory lock key (any 64-bit number; this one spells "cg-write").
WRITE_LOCK_KEY = 0x63672D7772697465  # (the sync lock's key is in contextgraph.store.pglock)
# Connections per process: an MCP server's threads plus a sync (its lock session is separate).
PG_POOL_SIZE = 5
PG_MAX_OVERFLOW = 10


def make_pg_engine(url: Any, *, busy_timeout_ms: int) -> Engine:
    """An engine on a PostgreSQL server through psycopg 3, with our two transaction kinds."""
    if url.get_driver_name() not in ("psycopg", "psycopg2", ""):
        raise DatabaseError(f"PostgreSQL is reached through psycopg 3, not {url.get_driver_name()}")
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise DatabaseError(
            'PostgreSQL needs psycopg 3: pip install "contextgraph[postgres]"'
        ) from exc
    url = url.set(drivername="postgresql+psycopg")
    engine = create_engine(
        url,
        pool_size=PG_POOL_SIZE,
        max_overflow=PG_MAX_OVERFLOW,
        pool_timeout=max(30.0, busy_timeout_ms / 1000),
        pool_pre_ping=True,
        connect_args={"application_name": "contextgraph", "connect_timeout": 10},
    )

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _driver_sql(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, context: Any, _many: bool
    ) -> tuple[str, Any]:
        # Driver-level text compiled for SQLite (sqlcore.driver_sql) runs as PostgreSQL's own.
        if context is not None and context.compiled is None:
            from contextgraph.store.dialect import translate

            statement = translate(statement, "postgresql")
        return statement, parameters

    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        # PostgreSQL text cannot hold NUL, so no stored name or text contains one (SQLite's do
        # not either: a file with NUL bytes is refused as binary). Input with a NUL is a clear
        # argument error here, never a driver traceback.
        if "cannot contain NUL" in str(context.original_exception):
            from contextgraph.errors import InvalidArgument

            raise InvalidArgument("the text holds a NUL (0x00) character, which PostgreSQL refuses")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get("contextgraph_write", False):
            wait_ms = int(float(options.get("contextgraph_wait", 120.0)) * 1000)
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, wait_ms)}")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")
            conn.exec_driver_sql("SET LOCAL lock_timeout = 0")
            check_held()  # a sync's write: never once another sync may have its lock
        else:
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    return engine


__all__ = ["PG_MAX_OVERFLOW", "PG_POOL_SIZE", "WRITE_LOCK_KEY", "make_pg_engine"]
