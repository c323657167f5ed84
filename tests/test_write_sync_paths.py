"""``sync.sync_paths``: syncing only the paths that changed leaves what a full sync would."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest
from helpers import snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextgraph import ContextGraph, NotFound
from contextgraph.sync.run import sync_paths

NAMES = ["a.md", "b.md", "sub/c.md", "sub/deep/d.md", "code.py", ".hidden.md", "node_modules/x.md"]
CONCEPTS = ["Alpha", "beta", "Gamma Ray", "alpha"]

edits = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.lists(st.sampled_from(CONCEPTS))),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just([])),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rmtree"), st.just("sub"), st.just([])),
)
_clock = itertools.count(1_800_000_000_000_000_000, 1_000_000_000)


def _edit(vault: Path, edit: tuple[object, ...]) -> list[str]:
    """Apply one edit; return the source-relative paths it touched (what a watcher reports)."""
    action, name, arg = edit
    path = vault / str(name)
    if action == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        if str(name).endswith(".py"):
            path.write_text(f"import os\n# {arg}\n")
        else:
            path.write_text("Text " + " ".join(f"[[{c}]]" for c in arg) + "\n")  # type: ignore[attr-defined]
        stamp = next(_clock)
        os.utime(path, ns=(stamp, stamp))
        return [str(name)]
    if action == "delete":
        path.unlink(missing_ok=True)
        return [str(name)]
    if action == "rename" and path.exists():
        target = vault / str(arg)
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)
        return [str(name), str(arg)]
    if action == "rmtree":
        shutil.rmtree(path, ignore_errors=True)
        return [str(name)]
    return []


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(st.lists(edits, min_size=1, max_size=4), min_size=1, max_size=4))
def test_syncing_the_touched_paths_equals_a_from_scratch_sync(
    tmp_path_factory: pytest.TempPathFactory, steps: list[list[tuple[object, ...]]]
) -> None:
    base = tmp_path_factory.mktemp("paths")
    vault = base / "vault"
    vault.mkdir()
    live = ContextGraph.open(base / "live.db")
    live.sync([vault], name="v")
    try:
        for i, step in enumerate(steps):
            touched = [p for edit in step for p in _edit(vault, edit)]
            sync_paths(live.engine, live.settings, "v", touched)
            fresh = ContextGraph.open(base / f"fresh{i}.db")
            fresh.sync([vault], name="v")
            assert snapshot(live) == snapshot(fresh)
            assert live.doctor().ok
            fresh.close()
    finally:
        live.close()


def test_a_rename_between_two_given_paths_keeps_the_read_time(
    store: ContextGraph, vault: Path
) -> None:
    (vault / "a.md").write_text("[[Alpha]]\n")
    store.sync([vault])
    before = store.read("a.md", now="2026-11-01T00:00:00+00:00").last_accessed
    (vault / "a.md").rename(vault / "b.md")
    report = sync_paths(store.engine, store.settings, "vault", ["a.md", "b.md"])
    assert (report.renamed, report.added, report.deleted) == (1, 0, 0)
    assert store.read("b.md", now="2020-01-01T00:00:00+00:00").last_accessed == before


def test_a_folder_among_the_paths_syncs_the_source(store: ContextGraph, vault: Path) -> None:
    (vault / "sub").mkdir()
    (vault / "sub" / "x.md").write_text("[[X]]\n")
    store.sync([vault])
    shutil.rmtree(vault / "sub")
    report = sync_paths(store.engine, store.settings, "vault", ["sub"])
    assert report.deleted == 1 and store.search("x").total == 0


def test_an_unknown_source_is_not_found(store: ContextGraph) -> None:
    with pytest.raises(NotFound):
        sync_paths(store.engine, store.settings, "nope", ["a.md"])


# -- a hunt of the store-equals-a-fresh-sync invariant (stop 43) -------------------------------


def _fresh(tmp_path: Path, folder: Path) -> dict[str, object]:
    with ContextGraph.open(tmp_path / "fresh.db") as graph:
        graph.sync([folder], name="A")
        return snapshot(graph)


def test_a_write_or_an_edit_in_a_source_with_links_keeps_what_a_walk_keeps(
    tmp_path: Path,
) -> None:
    source = tmp_path / "A"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "n.md").write_text("[[Alpha]] [[Beta]]\n", encoding="utf-8")
    (source / "a.md").write_text("[[Alpha]]\n", encoding="utf-8")
    os.symlink("sub", source / "alias")  # sorts first: the walk keeps alias/n.md
    os.symlink("a.md", source / "link.md")  # one note, two paths
    with ContextGraph.open(tmp_path / "live.db") as graph:
        graph.sync([source], name="A")
        graph.write_note("sub/new.md", "[[Alpha]] [[Gamma]]\n", source="A")
        assert snapshot(graph) == _fresh(tmp_path / "1", source)
        (source / "sub" / "n.md").write_text("[[Delta]]\n", encoding="utf-8")
        sync_paths(graph.engine, graph.settings, "A", ["sub/n.md"])  # a watcher's batch
        assert snapshot(graph) == _fresh(tmp_path / "2", source)
        graph.edit_note("memory://A/a.md", "append", content="[[Beta]]\n")
        assert snapshot(graph) == _fresh(tmp_path / "3", source)


def test_a_folder_that_becomes_a_virtual_environment_leaves_the_store(tmp_path: Path) -> None:
    source = tmp_path / "A"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "n.md").write_text("[[Alpha]] [[Beta]]\n", encoding="utf-8")
    with ContextGraph.open(tmp_path / "live.db") as graph:
        graph.sync([source], name="A")
        (source / "sub" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
        sync_paths(graph.engine, graph.settings, "A", ["sub/pyvenv.cfg"])  # what watch passes
        assert snapshot(graph) == _fresh(tmp_path / "1", source)
        (source / "sub" / "pyvenv.cfg").unlink()
        sync_paths(graph.engine, graph.settings, "A", ["sub/pyvenv.cfg"])
        assert snapshot(graph) == _fresh(tmp_path / "2", source)


def test_a_removed_source_leaves_no_mark_behind(tmp_path: Path) -> None:
    """A new source may get a removed one's id: it must not inherit what was said of it."""
    from contextgraph.store import db, meta

    source = tmp_path / "A"
    source.mkdir()
    (source / "a.md").write_text("[[Alpha]]\n", encoding="utf-8")
    os.symlink("a.md", source / "link.md")
    with ContextGraph.open(tmp_path / "live.db") as graph:
        graph.sync([source], name="A")
        (info,) = graph.sources()
        keys = (meta.extracted(info.id), meta.linked(info.id))
        with db.read(graph.engine) as conn:
            assert all(meta.get(conn, key) is not None for key in keys)
        graph.remove_source("A")
        with db.read(graph.engine) as conn:
            assert [meta.get(conn, key) for key in keys] == [None, None]
