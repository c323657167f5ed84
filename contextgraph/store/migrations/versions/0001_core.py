"""core schema

Revision ID: 0001_core
Revises:
Create Date: 2026-11-30 19:01:52.344768
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_core"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIGINT = sa.Integer().with_variant(sa.BigInteger(), "postgresql")
# Byte-wise text order on PostgreSQL too (SQLite's BINARY collation).
_STR = sa.String().with_variant(sa.String(collation="C"), "postgresql")
_TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:

    op.create_table(
        "communities",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_communities")),
    )
    op.create_table(
        "community_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("algorithm", _STR, nullable=False),
        sa.Column("resolution", sa.Float(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("modularity", sa.Float(), nullable=False),
        sa.Column("node_count", sa.Integer(), nullable=False),
        sa.Column("edge_count", sa.Integer(), nullable=False),
        sa.Column("community_count", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_community_runs")),
    )
    op.create_table(
        "meta",
        sa.Column("key", _STR, nullable=False),
        sa.Column("value", _STR, nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_meta")),
    )
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", _STR, nullable=False),
        sa.Column("root", _STR, nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sources")),
        sa.UniqueConstraint("name", name=op.f("uq_sources_name")),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("path", _STR, nullable=False),
        sa.Column("kind", _STR, nullable=False),
        # 8-byte on PostgreSQL (nanosecond mtimes); SQLite's INTEGER is 8-byte already.
        sa.Column("size", _BIGINT, nullable=False),
        sa.Column("mtime_ns", _BIGINT, nullable=False),
        sa.Column("hash", _STR, nullable=False),
        sa.Column("title", _STR, nullable=True),
        sa.Column("created", sa.Float(), nullable=True),
        sa.Column("modified", sa.Float(), nullable=False),
        sa.Column("last_accessed", sa.Float(), nullable=True),
        sa.Column("text", _TEXT, nullable=True),
        sa.Column("facts", _TEXT, nullable=True),
        sa.Column("concept_count", sa.Integer(), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("warning", _STR, nullable=True),
        sa.ForeignKeyConstraint(
            ["source_id"],
            ["sources.id"],
            name=op.f("fk_files_source_id_sources"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
        sa.UniqueConstraint("source_id", "path", name=op.f("uq_files_source_id_path")),
    )
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.create_index("ix_files_hash", ["hash"], unique=False)

    op.create_table(
        "entities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", _STR, nullable=False),
        sa.Column("key", _STR, nullable=False),
        sa.Column("name", _STR, nullable=False),
        sa.Column("name_lower", _STR, nullable=False),
        sa.Column("file_id", sa.Integer(), nullable=True),
        sa.Column("path", _STR, nullable=True),
        sa.Column("community_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name=op.f("fk_entities_file_id_files"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entities")),
        sa.UniqueConstraint("kind", "key", name=op.f("uq_entities_kind_key")),
    )
    with op.batch_alter_table("entities", schema=None) as batch_op:
        batch_op.create_index("ix_entities_community_id", ["community_id"], unique=False)
        batch_op.create_index("ix_entities_file_id", ["file_id"], unique=False)
        batch_op.create_index("ix_entities_name_lower", ["name_lower"], unique=False)

    op.create_table(
        "concept_relations",
        sa.Column("a_id", sa.Integer(), nullable=False),
        sa.Column("b_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.CheckConstraint("a_id < b_id", name=op.f("ck_concept_relations_ordered")),
        sa.ForeignKeyConstraint(
            ["a_id"],
            ["entities.id"],
            name=op.f("fk_concept_relations_a_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["b_id"],
            ["entities.id"],
            name=op.f("fk_concept_relations_b_id_entities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("a_id", "b_id", name=op.f("pk_concept_relations")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("concept_relations", schema=None) as batch_op:
        batch_op.create_index("ix_concept_relations_b_id_a_id", ["b_id", "a_id"], unique=False)

    op.create_table(
        "mentions",
        sa.Column("file_id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["concept_id"],
            ["entities.id"],
            name=op.f("fk_mentions_concept_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name=op.f("fk_mentions_file_id_files"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("file_id", "concept_id", name=op.f("pk_mentions")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("mentions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_mentions_concept_id_file_id", ["concept_id", "file_id"], unique=False
        )

    op.create_table(
        "relations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("src_id", sa.Integer(), nullable=False),
        sa.Column("dst_id", sa.Integer(), nullable=False),
        sa.Column("type", _STR, nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("file_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dst_id"],
            ["entities.id"],
            name=op.f("fk_relations_dst_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name=op.f("fk_relations_file_id_files"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["src_id"],
            ["entities.id"],
            name=op.f("fk_relations_src_id_entities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_relations")),
        sa.UniqueConstraint(
            "src_id", "dst_id", "type", name=op.f("uq_relations_src_id_dst_id_type")
        ),
    )
    with op.batch_alter_table("relations", schema=None) as batch_op:
        batch_op.create_index("ix_relations_dst_id", ["dst_id"], unique=False)
        batch_op.create_index("ix_relations_file_id", ["file_id"], unique=False)

    # Provenance of a co-occurrence: the notes that mention both concepts (pairs counted only for
    # notes within the concept limit). A view, so it can never disagree with the mentions.
    op.execute(
        """CREATE VIEW relation_files AS
        SELECT m1.concept_id AS a_id, m2.concept_id AS b_id, m1.file_id AS file_id
        FROM mentions m1
        JOIN mentions m2 ON m2.file_id = m1.file_id AND m1.concept_id < m2.concept_id
        JOIN files f ON f.id = m1.file_id AND f.pairs = 1"""
    )


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS relation_files")

    with op.batch_alter_table("relations", schema=None) as batch_op:
        batch_op.drop_index("ix_relations_file_id")
        batch_op.drop_index("ix_relations_dst_id")

    op.drop_table("relations")
    with op.batch_alter_table("mentions", schema=None) as batch_op:
        batch_op.drop_index("ix_mentions_concept_id_file_id")

    op.drop_table("mentions")
    with op.batch_alter_table("concept_relations", schema=None) as batch_op:
        batch_op.drop_index("ix_concept_relations_b_id_a_id")

    op.drop_table("concept_relations")
    with op.batch_alter_table("entities", schema=None) as batch_op:
        batch_op.drop_index("ix_entities_name_lower")
        batch_op.drop_index("ix_entities_file_id")
        batch_op.drop_index("ix_entities_community_id")

    op.drop_table("entities")
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.drop_index("ix_files_hash")

    op.drop_table("files")
    op.drop_table("sources")
    op.drop_table("meta")
    op.drop_table("community_runs")
    op.drop_table("communities")
