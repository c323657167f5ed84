"""full-text index of file text, kept in step by triggers

SQLite: an external-content FTS5 table. PostgreSQL: a ``tsvector`` column of ``files`` that a
trigger computes from title and text, with a GIN index.

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


# PostgreSQL. contextgraph_search_words() turns every run of non-alphanumeric characters into a
# space, so a document splits into words as FTS5's unicode61 splits it (``auth.token_validator``
# -> auth, token, validator) rather than into PostgreSQL's host/file tokens; queries pass their
# terms through the same function, so both sides always agree. 'simple' lower-cases only.
# A tsvector holds at most 1 MB: a text too large for one is indexed without word positions
# from its first 500,000 characters (phrases then match as all-of-the-words there).
# Letters and digits are told apart by ICU where the server has it ("und-x-icu"), so the split
# does not depend on the database's locale (a "C" database would otherwise split "café").
PG_WORDS = """CREATE FUNCTION contextgraph_search_words(value text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT regexp_replace(coalesce(value, ''){collate}, '[^[:alnum:]]+', ' ', 'g') $$"""
PG_STATEMENTS = (
    """CREATE FUNCTION contextgraph_search_vector(title text, body text) RETURNS tsvector
        LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
        head tsvector := setweight(
            to_tsvector('simple', contextgraph_search_words(title)), 'A');
    BEGIN
        IF length(coalesce(body, '')) <= 100000 THEN
            RETURN head || setweight(to_tsvector('simple', contextgraph_search_words(body)), 'B');
        END IF;
        BEGIN
            RETURN head || setweight(to_tsvector('simple', contextgraph_search_words(body)), 'B');
        EXCEPTION WHEN program_limit_exceeded THEN
            RETURN head || setweight(strip(to_tsvector('simple',
                contextgraph_search_words(left(body, 500000)))), 'B');
        END;
    END $$""",
    "ALTER TABLE files ADD COLUMN search_tsv tsvector",
    """CREATE FUNCTION files_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_tsv := contextgraph_search_vector(NEW.title, NEW.text);
        RETURN NEW;
    END $$""",
    # Only when title or text change: read()'s last_accessed writes cost nothing here.
    """CREATE TRIGGER files_search_tsv BEFORE INSERT OR UPDATE OF title, text ON files
        FOR EACH ROW EXECUTE FUNCTION files_search_tsv()""",
    "UPDATE files SET search_tsv = contextgraph_search_vector(title, text)",
    "CREATE INDEX ix_files_search_tsv ON files USING gin (search_tsv)",
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        icu = bind.exec_driver_sql(
            "SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'"
        ).first()
        op.execute(PG_WORDS.format(collate=' COLLATE "und-x-icu"' if icu else ""))
        for statement in PG_STATEMENTS:
            op.execute(statement)
        return
    for statement in STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_files_search_tsv")
        op.execute("DROP TRIGGER IF EXISTS files_search_tsv ON files")
        op.execute("DROP FUNCTION IF EXISTS files_search_tsv()")
        op.execute("ALTER TABLE files DROP COLUMN IF EXISTS search_tsv")
        op.execute("DROP FUNCTION IF EXISTS contextgraph_search_vector(text, text)")
        op.execute("DROP FUNCTION IF EXISTS contextgraph_search_words(text)")
        return
    op.execute("DROP TRIGGER IF EXISTS files_fts_update")
    op.execute("DROP TRIGGER IF EXISTS files_fts_delete")
    op.execute("DROP TRIGGER IF EXISTS files_fts_insert")
    op.execute("DROP TABLE IF EXISTS files_fts")
