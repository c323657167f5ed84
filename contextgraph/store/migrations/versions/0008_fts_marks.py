"""the full-text index keeps combining marks inside words (Devanagari, Arabic, Thai, ...)

FTS5's ``unicode61`` tokenizer counts only letters, numbers and private-use characters (``L*
N* Co``) as parts of a word by default. A combining mark (``M*``) is then a separator, so a
Hindi word such as ``पानी`` was indexed as ``प`` and ``न``, an Arabic word with its vowel marks
as single letters, and a search for either matched notes that merely hold those letters.
The index is rebuilt with ``categories 'L* N* Co M*'``; ``remove_diacritics 2`` still folds
Latin diacritics, written precomposed or as combining marks (``café`` finds ``cafe``).
:mod:`contextgraph.graph.ftsquery` splits a query by the same classes. PostgreSQL's index is
built by its own parser and is not touched.

Revision ID: 0008_fts_marks
Revises: 0007_files_state_index
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008_fts_marks"
down_revision: str | None = "0007_files_state_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DROP = (
    "DROP TRIGGER IF EXISTS files_fts_update",
    "DROP TRIGGER IF EXISTS files_fts_delete",
    "DROP TRIGGER IF EXISTS files_fts_insert",
    "DROP TABLE IF EXISTS files_fts",
)
_COLUMNS = "title, text, search_meta, search_parts"
_NEW = ", ".join(f"new.{c.strip()}" for c in _COLUMNS.split(","))
_OLD = ", ".join(f"old.{c.strip()}" for c in _COLUMNS.split(","))


def _create(tokenize: str) -> tuple[str, ...]:
    """The index over ``files`` (external content, kept by triggers), filled from the table;
    ``tokenize`` is the option as written, quotes included."""
    return (
        f"""CREATE VIRTUAL TABLE files_fts USING fts5(
        {_COLUMNS}, content='files', content_rowid='id',
        tokenize={tokenize})""",
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


TOKENIZE = "\"porter unicode61 remove_diacritics 2 categories 'L* N* Co M*'\""
TOKENIZE_0003 = "'porter unicode61 remove_diacritics 2'"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    for statement in (*_DROP, *_create(TOKENIZE)):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    for statement in (*_DROP, *_create(TOKENIZE_0003)):
        op.execute(statement)
