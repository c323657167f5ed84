"""Optional tier: sync the real vaults in ../shared/corpora (skipped when they are absent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CORPORA, first_links_agree, whole_note_preview

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


@pytest.mark.skipif(not VAULTS, reason="../shared/corpora is not present")
@pytest.mark.parametrize("name", VAULTS)
def test_first_links_read_as_far_as_needed_agree_with_the_whole_note(name: str) -> None:
    checked = sum(
        first_links_agree(path.read_bytes().decode("utf-8", "replace"))
        for path in sorted((CORPORA / name).rglob("*.md"))
    )
    assert checked > 0


@pytest.mark.skipif(not VAULTS, reason="../shared/corpora is not present")
@pytest.mark.parametrize("name", VAULTS)
def test_previews_of_real_notes_agree_with_whole_note_reading(name: str) -> None:
    from contextgraph.notes.preview import content_preview
    from contextgraph.notes.wikilinks import find_links

    checked = 0
    for path in sorted((CORPORA / name).rglob("*.md")):
        text = path.read_bytes().decode("utf-8", "replace")
        concepts = list(dict.fromkeys(link.concept for link in find_links(text) if link.concept))
        for related, query in zip(concepts[-3:], [*concepts[:2], "absent"], strict=False):
            assert content_preview(text, related, query) == whole_note_preview(
                text, related, query
            ), (path, related, query)
            checked += 1
    assert checked > 0
