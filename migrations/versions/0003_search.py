"""code-aware full-text index: path, heading and symbol names, identifier spellings

Revision ID: 0003_search
Revises: 0002_fts

Adds ``files.search_meta`` and ``files.search_parts`` (see ``contextgraph.searchterms``), fills
them for the files already stored, and rebuilds the FTS5 index over four columns
(title, text, search_meta, search_parts) with the Porter stemmer in front of ``unicode61``,
so ``validate`` finds ``validator`` and ``tokens`` finds ``token``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_search"
down_revision: str | None = "0002_fts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DROP = (
    "DROP TRIGGER IF EXISTS files_fts_update",
    "DROP TRIGGER IF EXISTS files_fts_delete",
    "DROP TRIGGER IF EXISTS files_fts_insert",
    "DROP TABLE IF EXISTS files_fts",
)

# External content over files: the triggers are the only writers of the index, so it can never
# hold a row for a file that is gone or a text that was replaced. The update trigger fires only
# when an indexed column changes, so read()'s last_accessed writes cost nothing here.
_COLUMNS = "title, text, search_meta, search_parts"
_NEW = ", ".join(f"new.{c.strip()}" for c in _COLUMNS.split(","))
_OLD = ", ".join(f"old.{c.strip()}" for c in _COLUMNS.split(","))
CREATE = (
    f"""CREATE VIRTUAL TABLE files_fts USING fts5(
        {_COLUMNS}, content='files', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER files_fts_insert AFTER INSERT ON files BEGIN
        INSERT INTO files_fts(rowid, {_COLUMNS}) VALUES (new.id, {_NEW});
    END""",
    f"""CREATE TRIGGER files_fts_delete AFTER DELETE ON files BEGIN
        INSERT INTO files_fts(files_fts, rowid, {_COLUMNS}) VALUES ('delete', old.id, {_OLD});
    END""",
    f"""CREATE TRIGGER files_fts_update AFTER UPDATE OF {_COLUMNS} ON files BEGIN
        INSERT INTO files_fts(files_fts, rowid, {_COLUMNS}) VALUES ('delete', old.id, {_OLD});
        INSERT INTO files_fts(rowid, {_COLUMNS}) VALUES (new.id, {_NEW});
    END""",
    "INSERT INTO files_fts(files_fts) VALUES ('rebuild')",
)

# The index as 0002_fts made it, for downgrade.
CREATE_0002 = (
    """CREATE VIRTUAL TABLE files_fts USING fts5(
        title, text, content='files', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER files_fts_insert AFTER INSERT ON files BEGIN
        INSERT INTO files_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
    END""",
    """CREATE TRIGGER files_fts_delete AFTER DELETE ON files BEGIN
        INSERT INTO files_fts(files_fts, rowid, title, text)
        VALUES ('delete', old.id, old.title, old.text);
    END""",
    """CREATE TRIGGER files_fts_update AFTER UPDATE OF title, text ON files BEGIN
        INSERT INTO files_fts(files_fts, rowid, title, text)
        VALUES ('delete', old.id, old.title, old.text);
        INSERT INTO files_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
    END""",
    "INSERT INTO files_fts(files_fts) VALUES ('rebuild')",
)


def _fill_search_columns() -> None:
    """Compute the new columns for every stored file (the data migration)."""
    from contextgraph.searchterms import identifier_parts, meta_terms

    conn = op.get_bind()
    files = sa.table(
        "files",
        sa.column("id"),
        sa.column("path"),
        sa.column("text"),
        sa.column("facts"),
        sa.column("search_meta"),
        sa.column("search_parts"),
    )
    update = (
        sa.update(files)
        .where(files.c.id == sa.bindparam("id_"))
        .values(search_meta=sa.bindparam("meta"), search_parts=sa.bindparam("parts"))
    )
    last = 0
    while True:  # in pages, so a large store is never read into memory at once
        rows = conn.execute(
            sa.select(files.c.id, files.c.path, files.c.text, files.c.facts)
            .where(files.c.id > last)
            .order_by(files.c.id)
            .limit(500)
        ).all()
        if not rows:
            return
        conn.execute(
            update,
            [
                {
                    "id_": r.id,
                    "meta": meta_terms(r.path, r.text, r.facts),
                    "parts": identifier_parts(r.text or ""),
                }
                for r in rows
            ],
        )
        last = rows[-1].id


def upgrade() -> None:
    for statement in _DROP:
        op.execute(statement)
    op.add_column("files", sa.Column("search_meta", sa.Text(), nullable=True))
    op.add_column("files", sa.Column("search_parts", sa.Text(), nullable=True))
    _fill_search_columns()
    for statement in CREATE:
        op.execute(statement)


def downgrade() -> None:
    for statement in _DROP:
        op.execute(statement)
    # Plain ALTER TABLE (SQLite 3.35+): a batch copy of `files` would cascade-delete its
    # mentions and entities when the old table is dropped with foreign keys on.
    op.execute("ALTER TABLE files DROP COLUMN search_parts")
    op.execute("ALTER TABLE files DROP COLUMN search_meta")
    for statement in CREATE_0002:
        op.execute(statement)
