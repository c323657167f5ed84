"""codesync: the code graph of a source is rebuilt from the facts cached per file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from contextgraph import ContextGraph
from contextgraph.store import db, meta
from contextgraph.store.models import T_ENTITIES, T_FILES, T_REL
from contextgraph.sync.codesync import rebuild_code_graph


def _graph(graph: ContextGraph) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]]:
    with db.read(graph.engine) as conn:
        entities = {
            (r.kind, r.key) for r in conn.execute(select(T_ENTITIES.c.kind, T_ENTITIES.c.key))
        }
        a, b = T_ENTITIES.alias("a"), T_ENTITIES.alias("b")
        relations = {
            (r[0], r[1], r[2])
            for r in conn.execute(
                select(a.c.key, b.c.key, T_REL.c.type)
                .join(a, a.c.id == T_REL.c.src_id)
                .join(b, b.c.id == T_REL.c.dst_id)
            )
        }
    return {e for e in entities if e[0] != "concept"}, relations


def _code_tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "a.py").write_text("import os\n\nclass A:\n    pass\n", encoding="utf-8")
    (root / "pkg" / "b.py").write_text("from pkg.a import A\n\nclass B(A):\n    pass\n", "utf-8")


def test_a_rebuild_reproduces_the_graph_sync_built_and_clears_the_stale_mark(
    tmp_path: Path,
) -> None:
    root = tmp_path / "code"
    _code_tree(root)
    graph = ContextGraph.open(tmp_path / "graph.db")
    graph.sync([root])
    built = _graph(graph)
    assert ("1:pkg/b.py::B", "1:pkg/a.py::A", "inherits") in built[1]
    with db.write(graph.engine) as conn:
        meta.mark_stale(conn, meta.code_graph(1))
        conn.execute(update(T_FILES).values(facts="not json"))  # facts of another parser version
    rebuild_code_graph(graph.engine, 1)
    assert _graph(graph) == built  # re-parsed from the stored text
    with db.read(graph.engine) as conn:
        assert not meta.is_stale(conn, meta.code_graph(1))
    graph.close()


def test_files_moved_meanwhile_leave_the_mark_for_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "code"
    _code_tree(root)
    graph = ContextGraph.open(tmp_path / "graph.db")
    graph.sync([root])
    with db.write(graph.engine) as conn:
        meta.mark_stale(conn, meta.code_graph(1))
    real_write = db.write

    def rename_then_write(engine: Engine, **kwargs: Any) -> Any:
        with real_write(engine) as conn:  # another sync renames a file after the rebuild read
            conn.execute(
                update(T_FILES).where(T_FILES.c.path == "pkg/a.py").values(path="pkg/c.py")
            )
        return real_write(engine, **kwargs)

    monkeypatch.setattr(db, "write", rename_then_write)
    rebuild_code_graph(graph.engine, 1)
    monkeypatch.undo()
    with db.read(graph.engine) as conn:
        assert meta.is_stale(conn, meta.code_graph(1))
    graph.close()
