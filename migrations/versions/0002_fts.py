"""full-text index of file text, kept in step by triggers

Revision ID: 0002_fts
Revises: 0001_core
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_fts"
down_revision: str | None = "0001_core"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# An external-content FTS5 table over files(title, text). The triggers are the only writers, so
# the index can never hold a row for a file that is gone or a text that was replaced. The update
# trigger fires only when title or text change, so read()'s last_accessed writes cost nothing here.
STATEMENTS = (
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


def upgrade() -> None:
    for statement in STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS files_fts_update")
    op.execute("DROP TRIGGER IF EXISTS files_fts_delete")
    op.execute("DROP TRIGGER IF EXISTS files_fts_insert")
    op.execute("DROP TABLE IF EXISTS files_fts")
