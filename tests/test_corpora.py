"""Optional tier: sync the real vaults in ../shared/corpora (skipped when they are absent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CORPORA

from contextgraph import ContextGraph

pytestmark = pytest.mark.corpus

VAULTS = sorted(p.name for p in CORPORA.iterdir() if p.is_dir()) if CORPORA.is_dir() else []


@pytest.mark.skipif(not VAULTS, reason="../shared/corpora is not present")
@pytest.mark.parametrize("name", VAULTS)
def test_real_vault_syncs_consistently_and_resyncs_as_a_no_op(name: str, tmp_path: Path) -> None:
    graph = ContextGraph.open(tmp_path / "corpus.db")
    report = graph.sync([CORPORA / name])
    assert report.scanned > 0
    assert report.concepts > 0 and report.relations > 0
    assert graph.doctor().ok
    again = graph.sync()
    assert again.unchanged == report.scanned - len(report.failed)
    assert (again.added, again.updated, again.deleted) == (0, 0, 0)
    top = graph.build_context(_busiest_concept(graph), include_content=True)
    assert top.direct_relations
    assert all(
        len(p) <= 240 for r in top.direct_relations for p in (r.content_preview or {}).values()
    )
    graph.close()


def _busiest_concept(graph: ContextGraph) -> str:
    from sqlalchemy import text

    from contextgraph.store import db

    with db.read(graph.engine) as conn:
        return str(
            conn.execute(
                text(
                    "SELECT e.key FROM entities e JOIN mentions m ON m.concept_id = e.id"
                    " GROUP BY e.id ORDER BY count(*) DESC, e.key LIMIT 1"
                )
            ).scalar_one()
        )
