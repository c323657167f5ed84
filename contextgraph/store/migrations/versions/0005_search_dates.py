"""files' dates and source in a narrow table for search, kept in step by triggers

Search tests every match's dates (and, unfiltered, its source) before it scores anything. Read
from ``files``, whose rows hold the whole text, that walks a table of several pages per few
rows, most of a common-word search's time; ``search_dates`` holds just those columns, about a
hundred rows a page. Triggers on ``files`` are its only writers (as for the full-text index),
so it always holds exactly one row per file with the file's own values.

Revision ID: 0005_search_dates
Revises: 0004_relation_weights
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_search_dates"
down_revision: str | None = "0004_relation_weights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = "id, source_id, created, modified, last_accessed"
_NEW = "new.id, new.source_id, new.created, new.modified, new.last_accessed"
# The update trigger fires only when one of the copied columns changes (read() writes
# last_accessed); a replaced row is removed and written again, so it cannot go missing.
SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER search_dates_insert AFTER INSERT ON files BEGIN
        INSERT OR REPLACE INTO search_dates({_COLUMNS}) VALUES ({_NEW});
    END""",
    f"""CREATE TRIGGER search_dates_update
        AFTER UPDATE OF id, source_id, created, modified, last_accessed ON files BEGIN
        DELETE FROM search_dates WHERE id = old.id;
        INSERT OR REPLACE INTO search_dates({_COLUMNS}) VALUES ({_NEW});
    END""",
    """CREATE TRIGGER search_dates_delete AFTER DELETE ON files BEGIN
        DELETE FROM search_dates WHERE id = old.id;
    END""",
)
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS search_dates_insert",
    "DROP TRIGGER IF EXISTS search_dates_update",
    "DROP TRIGGER IF EXISTS search_dates_delete",
)
# PostgreSQL does not read the table (its search joins files as it did), but holds it as SQLite
# does, so both engines have one schema.
PG_TRIGGERS = (
    f"""CREATE FUNCTION search_dates_copy() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM search_dates WHERE id = OLD.id;
        END IF;
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        INSERT INTO search_dates({_COLUMNS})
        VALUES (NEW.id, NEW.source_id, NEW.created, NEW.modified, NEW.last_accessed)
        ON CONFLICT (id) DO UPDATE SET source_id = EXCLUDED.source_id,
            created = EXCLUDED.created, modified = EXCLUDED.modified,
            last_accessed = EXCLUDED.last_accessed;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER search_dates_copy
        AFTER INSERT OR DELETE OR UPDATE OF id, source_id, created, modified, last_accessed
        ON files FOR EACH ROW EXECUTE FUNCTION search_dates_copy()""",
)
PG_DROP = (
    "DROP TRIGGER IF EXISTS search_dates_copy ON files",
    "DROP FUNCTION IF EXISTS search_dates_copy()",
)


def upgrade() -> None:
    op.create_table(
        "search_dates",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("created", sa.Float(), nullable=True),
        sa.Column("modified", sa.Float(), nullable=False),
        sa.Column("last_accessed", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_dates")),
    )
    # The data migration: every existing file's row, then the triggers keep them in step.
    op.execute(f"INSERT INTO search_dates({_COLUMNS}) SELECT {_COLUMNS} FROM files")
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in PG_TRIGGERS if postgresql else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in PG_DROP if postgresql else SQLITE_DROP:
        op.execute(statement)
    op.drop_table("search_dates")
