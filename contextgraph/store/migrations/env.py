"""Alembic environment: runs on the engine contextgraph passes in (or the configured URL)."""

from __future__ import annotations

from alembic import context

from contextgraph.store.db import make_engine, write
from contextgraph.store.models import metadata

config = context.config
target_metadata = metadata


def _include_name(name: str | None, type_: str, _parent: object) -> bool:
    # The FTS5 table and its shadow tables (SQLite), the tsvector column and its index
    # (PostgreSQL) are created by raw SQL in the full-text migrations, not by the models.
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith("files_fts")
    if type_ == "column":
        return name != "search_tsv"
    if type_ == "index":
        return name != "ix_files_search_tsv"
    return True


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
