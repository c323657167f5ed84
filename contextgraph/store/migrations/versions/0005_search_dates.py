"""each file's decay reference time and source in a narrow table for search, kept by triggers

Search tests every match's dates (and, unfiltered, its source) before it scores anything. Read
from ``files``, whose rows hold the whole text, that walks several pages per few rows, most of
a common-word search's time. ``search_dates`` holds, per file, its source and its decay
reference time (:func:`contextgraph.graph.decay.reference_sql`: the later of ``last_accessed``
and ``created``, or ``modified`` without a ``created``), about a hundred rows a page.

Triggers on ``files`` (and, on SQLite, on ``sources``) are its only writers, as for the
full-text index. On SQLite it holds a row for exactly the files whose source exists, so a
search sees a file without its source (foreign keys were off) as a missing row. PostgreSQL
always enforces the foreign key and does not read the table, but holds it too: one schema.

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


def _reference(row: str, greatest: str) -> str:
    """decay.reference_sql over ``row`` (SQLite's two-argument max is PostgreSQL's greatest)."""
    base = f"coalesce({row}created, {row}modified)"
    return f"{greatest}(coalesce({row}last_accessed, {base}), {base})"


_COPY = f"""INSERT OR REPLACE INTO search_dates(id, source_id, reference)
        SELECT new.id, new.source_id, {_reference("new.", "max")}
        WHERE EXISTS (SELECT 1 FROM sources WHERE sources.id = new.source_id);"""
# The update trigger fires only when a copied column changes (read() writes last_accessed); the
# row is removed and written again, so a replaced or re-sourced file cannot keep a stale one.
SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER search_dates_insert AFTER INSERT ON files BEGIN
        {_COPY}
    END""",
    f"""CREATE TRIGGER search_dates_update
        AFTER UPDATE OF id, source_id, created, modified, last_accessed ON files BEGIN
        DELETE FROM search_dates WHERE id = old.id;
        {_COPY}
    END""",
    """CREATE TRIGGER search_dates_delete AFTER DELETE ON files BEGIN
        DELETE FROM search_dates WHERE id = old.id;
    END""",
    """CREATE TRIGGER search_dates_source_delete AFTER DELETE ON sources BEGIN
        DELETE FROM search_dates WHERE source_id = old.id;
    END""",
    """CREATE TRIGGER search_dates_source_update AFTER UPDATE OF id ON sources BEGIN
        DELETE FROM search_dates WHERE source_id = old.id;
    END""",
)
SQLITE_FILL = f"""INSERT INTO search_dates(id, source_id, reference)
    SELECT id, source_id, {_reference("", "max")} FROM files
    WHERE EXISTS (SELECT 1 FROM sources WHERE sources.id = files.source_id)"""
SQLITE_DROP = tuple(
    f"DROP TRIGGER IF EXISTS search_dates_{name}"
    for name in ("insert", "update", "delete", "source_delete", "source_update")
)
PG_TRIGGERS = (
    f"""CREATE FUNCTION search_dates_copy() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM search_dates WHERE id = OLD.id;
        END IF;
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        INSERT INTO search_dates(id, source_id, reference)
        VALUES (NEW.id, NEW.source_id, {_reference("NEW.", "greatest")})
        ON CONFLICT (id) DO UPDATE
        SET source_id = EXCLUDED.source_id, reference = EXCLUDED.reference;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER search_dates_copy
        AFTER INSERT OR DELETE OR UPDATE OF id, source_id, created, modified, last_accessed
        ON files FOR EACH ROW EXECUTE FUNCTION search_dates_copy()""",
)
PG_FILL = (
    f"INSERT INTO search_dates(id, source_id, reference)"
    f" SELECT id, source_id, {_reference('', 'greatest')} FROM files"
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
        sa.Column("reference", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_dates")),
    )
    # The data migration: a row for every existing file, then the triggers keep them in step.
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.execute(PG_FILL if postgresql else SQLITE_FILL)
    for statement in PG_TRIGGERS if postgresql else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in PG_DROP if postgresql else SQLITE_DROP:
        op.execute(statement)
    op.drop_table("search_dates")
