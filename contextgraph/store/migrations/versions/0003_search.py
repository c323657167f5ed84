"""code-aware full-text index: path, heading and symbol names, identifier spellings

Revision ID: 0003_search
Revises: 0002_fts

Adds ``files.search_meta`` and ``files.search_parts`` (see
``contextgraph.graph.searchterms``), fills them for the files already stored, and rebuilds the
FTS5 index over four columns
(title, text, search_meta, search_parts) with the Porter stemmer in front of ``unicode61``,
so ``validate`` finds ``validator`` and ``tokens`` finds ``token``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_search"
down_revision: str | None = "0002_fts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger(__name__)

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
    from contextgraph.graph.searchterms import identifier_parts, meta_terms

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


# PostgreSQL: the ``tsvector`` of 0002 now spans the four columns, weighted A title, B meta,
# C text, D parts (search.COLUMN_WEIGHTS sets the weight of each label at query time), through
# the ``contextgraph`` configuration: 'simple' words, then diacritics removed (``unaccent``,
# where the server offers it) and English stems (Snowball, with no stopword list, so no word is
# dropped) -- what FTS5's 'porter unicode61 remove_diacritics 2' does on SQLite.
_PG_VECTOR = """CREATE FUNCTION contextgraph_search_vector(
        title text, body text, meta text, parts text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    head tsvector := setweight(
            to_tsvector('contextgraph', contextgraph_search_words(title)), 'A')
        || setweight(to_tsvector('contextgraph', contextgraph_search_words(meta)), 'B');
BEGIN
    IF length(coalesce(body, '')) + length(coalesce(parts, '')) <= 100000 THEN
        RETURN head
            || setweight(to_tsvector('contextgraph', contextgraph_search_words(body)), 'C')
            || setweight(to_tsvector('contextgraph', contextgraph_search_words(parts)), 'D');
    END IF;
    BEGIN
        RETURN head
            || setweight(to_tsvector('contextgraph', contextgraph_search_words(body)), 'C')
            || setweight(to_tsvector('contextgraph', contextgraph_search_words(parts)), 'D');
    EXCEPTION WHEN program_limit_exceeded THEN
        -- over a tsvector's 1 MB: the start of the text, without word positions
        RETURN head
            || setweight(strip(to_tsvector('contextgraph',
                contextgraph_search_words(left(body, 500000)))), 'C')
            || setweight(strip(to_tsvector('contextgraph',
                contextgraph_search_words(left(parts, 200000)))), 'D');
    END;
END $$"""
_PG_WORD_TYPES = (
    "asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part,"
    " hword_numpart"
)
PG_CREATE = (
    "CREATE TEXT SEARCH DICTIONARY contextgraph_stem (TEMPLATE = snowball, Language = english)",
    "CREATE TEXT SEARCH CONFIGURATION contextgraph (COPY = simple)",
    _PG_VECTOR,
    """CREATE OR REPLACE FUNCTION files_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_tsv := contextgraph_search_vector(
            NEW.title, NEW.text, NEW.search_meta, NEW.search_parts);
        RETURN NEW;
    END $$""",
    "DROP TRIGGER files_search_tsv ON files",
    """CREATE TRIGGER files_search_tsv
        BEFORE INSERT OR UPDATE OF title, text, search_meta, search_parts ON files
        FOR EACH ROW EXECUTE FUNCTION files_search_tsv()""",
    "DROP FUNCTION contextgraph_search_vector(text, text)",
    "UPDATE files SET search_tsv = contextgraph_search_vector(title, text, search_meta,"
    " search_parts)",
)
# Back to 0002's two-column vector.
PG_DROP = (
    """CREATE FUNCTION contextgraph_search_vector(title text, body text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT setweight(to_tsvector('simple', contextgraph_search_words(title)), 'A')
            || setweight(to_tsvector('simple', contextgraph_search_words(left(body, 500000))),
                         'B') $$""",
    """CREATE OR REPLACE FUNCTION files_search_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_tsv := contextgraph_search_vector(NEW.title, NEW.text);
        RETURN NEW;
    END $$""",
    "DROP TRIGGER files_search_tsv ON files",
    """CREATE TRIGGER files_search_tsv BEFORE INSERT OR UPDATE OF title, text ON files
        FOR EACH ROW EXECUTE FUNCTION files_search_tsv()""",
    "DROP FUNCTION contextgraph_search_vector(text, text, text, text)",
    "DROP TEXT SEARCH CONFIGURATION contextgraph",
    "DROP TEXT SEARCH DICTIONARY contextgraph_stem",
    "UPDATE files SET search_tsv = contextgraph_search_vector(title, text)",
)
# Text compared byte-wise on PostgreSQL, as every text column (models.LongText).
_TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _pg_upgrade() -> None:
    bind = op.get_bind()
    op.add_column("files", sa.Column("search_meta", _TEXT, nullable=True))
    op.add_column("files", sa.Column("search_parts", _TEXT, nullable=True))
    _fill_search_columns()
    for statement in PG_CREATE[:2]:
        op.execute(statement)
    filters = "contextgraph_stem"
    if _pg_unaccent(bind):
        filters = "unaccent, contextgraph_stem"
    op.execute(
        f"ALTER TEXT SEARCH CONFIGURATION contextgraph ALTER MAPPING FOR {_PG_WORD_TYPES}"
        f" WITH {filters}"
    )
    for statement in PG_CREATE[2:]:
        op.execute(statement)


def _pg_unaccent(bind: sa.Connection) -> bool:
    """Make the ``unaccent`` extension available if the server has it and we may."""
    if bind.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'unaccent'").first():
        return True
    available = bind.exec_driver_sql(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent'"
    ).first()
    if not available:
        log.warning("PostgreSQL has no unaccent extension: search keeps diacritics")
        return False
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION unaccent")
    except sa.exc.DBAPIError as exc:
        log.warning("cannot create the unaccent extension (%s): search keeps diacritics", exc.orig)
        return False
    return True


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _pg_upgrade()
        return
    for statement in _DROP:
        op.execute(statement)
    op.add_column("files", sa.Column("search_meta", sa.Text(), nullable=True))
    op.add_column("files", sa.Column("search_parts", sa.Text(), nullable=True))
    _fill_search_columns()
    for statement in CREATE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in PG_DROP:
            op.execute(statement)
        op.execute("ALTER TABLE files DROP COLUMN search_parts")
        op.execute("ALTER TABLE files DROP COLUMN search_meta")
        return
    for statement in _DROP:
        op.execute(statement)
    # Plain ALTER TABLE (SQLite 3.35+): a batch copy of `files` would cascade-delete its
    # mentions and entities when the old table is dropped with foreign keys on.
    op.execute("ALTER TABLE files DROP COLUMN search_parts")
    op.execute("ALTER TABLE files DROP COLUMN search_meta")
    for statement in CREATE_0002:
        op.execute(statement)
