"""precomputed per-relation decay-weight sums for BuildContext

Revision ID: 0004_relation_weights
Revises: 0003_search
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_relation_weights"
down_revision: str | None = "0003_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Derived data only: empty after the upgrade, filled by the next sync that changes the
    # graph (readers compute on the fly until then), so there is nothing to migrate.
    op.create_table(
        "relation_weights",
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("other_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("community_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("concept_id", "rank", name=op.f("pk_relation_weights")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "relation_weight_windows",
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("valid_from", sa.Float(), nullable=False),
        sa.Column("valid_until", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("concept_id", name=op.f("pk_relation_weight_windows")),
    )
    op.create_table(
        "concept_strengths",
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("strength", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("concept_id", name=op.f("pk_concept_strengths")),
    )


def downgrade() -> None:
    op.drop_table("concept_strengths")
    op.drop_table("relation_weight_windows")
    # meta['relation_weights'] may stay: with the lists gone a reader finds no window and
    # computes on the fly, and the next graph change makes a sync fill them again.
    op.drop_table("relation_weights")
