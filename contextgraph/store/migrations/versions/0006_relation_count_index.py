"""the second-end index of concept_relations carries the count, so reading relations by either end
reads the index alone

``concept_relations`` is keyed (a_id, b_id) and holds the count beside the key, so a concept's
relations as the smaller end are one range of the table. As the larger end they came from
``ix_concept_relations_b_id_a_id``, which held no count: each row cost a second search, by key,
into the table. BuildContext reads relations by both ends (its neighbourhoods, the community
siblings' walk and match): with the count in the index, the second search goes. The price is on
writes: a count that changes rewrites its index entry too (an existing pair's increment costs
about twice as much; a cold load builds the index once at its end, as before).

Revision ID: 0006_relation_count_index
Revises: 0005_search_dates
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006_relation_count_index"
down_revision: str | None = "0005_search_dates"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "ix_concept_relations_b_id_a_id"
NEW = "ix_concept_relations_b_id_a_id_count"


def upgrade() -> None:
    op.create_index(NEW, "concept_relations", ["b_id", "a_id", "count"])
    op.drop_index(OLD, table_name="concept_relations")


def downgrade() -> None:
    op.create_index(OLD, "concept_relations", ["b_id", "a_id"])
    op.drop_index(NEW, table_name="concept_relations")
