"""Alembic environment: runs on the engine contextgraph passes in (or the configured URL)."""

from __future__ import annotations

from alembic import context

from contextgraph.db import make_engine, write
from contextgraph.models import Base

config = context.config
target_metadata = Base.metadata


def _include_name(name: str | None, type_: str, _parent: object) -> bool:
    # The FTS5 table and its shadow tables are created by raw SQL in 0002_fts, not by the models.
    return not (type_ == "table" and name is not None and name.startswith("files_fts"))


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    # BEGIN IMMEDIATE with retries: two processes opening a new database migrate one at a time,
    # and the second finds the work done.
    with write(engine) as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
            include_name=_include_name,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("contextgraph migrations run online only")
run_migrations_online()
