"""Writing notes (SPEC §14): every operation, every refusal, and the sync invariant."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextgraph import Conflict, ContextGraph, InvalidArgument, NotFound, Settings, UnsafePath
from contextgraph.store.identity import content_hash
from contextgraph.sync.writing import title_to_filename


@pytest.fixture
def graph(store: ContextGraph, vault: Path) -> ContextGraph:
    (vault / "seed.md").write_text("Seed [[Alpha]] [[Beta]]\n", encoding="utf-8")
    store.sync([vault])
    return store


def disk_hash(path: Path) -> str:
    return content_hash(path.read_bytes())


# -- write -----------------------------------------------------------------------------------


def test_write_note_creates_folders_and_is_searchable_when_it_returns(
    graph: ContextGraph, vault: Path
) -> None:
    written = graph.write_note("projects/kafka/lag.md", "Consumer lag in [[Kafka]] [[Alpha]]\n")
    assert written.action == "created"
    assert written.uri == "memory://vault/projects/kafka/lag.md"
    assert written.concepts == ("alpha", "kafka")
    path = vault / "projects" / "kafka" / "lag.md"
    assert path.read_text(encoding="utf-8") == "Consumer lag in [[Kafka]] [[Alpha]]\n"
    assert written.hash == disk_hash(path)
    assert [h.uri for h in graph.search("consumer lag").hits] == [written.uri]
    relations = {r.name for r in graph.build_context("Kafka").direct_relations}
    assert relations == {"alpha"}
    assert graph.read(written.uri).hash == written.hash
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")], "no temp file left"


def test_each_lone_surrogate_becomes_one_replacement_character(
    graph: ContextGraph, vault: Path
) -> None:
    # What a JSON client sends as "\\ud800": a str that UTF-8 cannot encode.
    written = graph.write_note("odd.md", "a\ud800b \udfff [[Lone\udc80ly]]\n")
    assert (vault / "odd.md").read_text(encoding="utf-8") == "a\ufffdb \ufffd [[Lone\ufffdly]]\n"
    assert written.concepts == ("lone\ufffdly",)
    assert [r.name for r in graph.build_context("Lone\ud800ly").direct_relations] == []
    assert graph.read("odd.md").hash == written.hash
    edited = graph.edit_note("odd.md", "append", content="x\udbff")
    assert (vault / "odd.md").read_text(encoding="utf-8").endswith("\nx\ufffd")
    assert edited.action == "edited"


def test_write_note_refuses_to_clobber_unless_overwrite(graph: ContextGraph, vault: Path) -> None:
    with pytest.raises(Conflict, match="already exists"):
        graph.write_note("seed.md", "replaced")
    assert "Seed" in (vault / "seed.md").read_text()
    replaced = graph.write_note("seed.md", "Now [[Gamma]]\n", overwrite=True)
    assert replaced.action == "replaced" and replaced.concepts == ("gamma",)
    assert graph.build_context("Alpha").direct_relations == ()


def test_stale_expected_hash_refuses_and_leaves_the_file_alone(
    graph: ContextGraph, vault: Path
) -> None:
    read = graph.read("seed.md")
    (vault / "seed.md").write_text("Someone else's edit [[Delta]]\n", encoding="utf-8")
    with pytest.raises(Conflict, match="changed since it was read"):
        graph.write_note("seed.md", "mine", overwrite=True, expected_hash=read.hash)
    with pytest.raises(Conflict, match="changed since it was read"):
        graph.edit_note("seed.md", "append", content="mine", expected_hash=read.hash)
    with pytest.raises(Conflict):
        graph.move_note("seed.md", "moved.md", expected_hash=read.hash)
    with pytest.raises(Conflict):
        graph.delete_note("seed.md", expected_hash=read.hash)
    assert (vault / "seed.md").read_text() == "Someone else's edit [[Delta]]\n"
    fresh = disk_hash(vault / "seed.md")
    done = graph.write_note("seed.md", "mine\n", overwrite=True, expected_hash=fresh)
    assert done.action == "replaced"


def test_expected_hash_of_a_deleted_file_is_a_conflict(graph: ContextGraph, vault: Path) -> None:
    digest = graph.read("seed.md").hash
    (vault / "seed.md").unlink()
    with pytest.raises(Conflict, match="deleted since"):
        graph.write_note("seed.md", "x", overwrite=True, expected_hash=digest)


@pytest.mark.parametrize(
    "path",
    [
        "../outside.md",
        "a/../../outside.md",
        "/etc/outside.md",
        "C:\\\\outside.md",
        "~/outside.md",
        "%2e%2e/outside.md",
        "a%2foutside.md",
        "nul\x00byte.md",
        ".hidden/x.md",
        ".x.md",
        "node_modules/x.md",
        "new\nline.md",
        "http://example.com/x.md",
        "memory://vault/../x.md",
    ],
)
def test_hostile_paths_are_refused_and_nothing_is_written(
    graph: ContextGraph, vault: Path, tmp_path: Path, path: str
) -> None:
    before = sorted(p for p in tmp_path.rglob("*") if "home" not in p.parts)
    with pytest.raises((UnsafePath, InvalidArgument)):
        graph.write_note(path, "x")
    after = sorted(p for p in tmp_path.rglob("*") if "home" not in p.parts)
    assert [p for p in after if p not in before and not p.name.startswith("graph.db")] == []


def test_only_markdown_is_written(graph: ContextGraph) -> None:
    with pytest.raises(InvalidArgument, match=r"\.md"):
        graph.write_note("memory://vault/script.py", "print(1)")


def test_a_symlinked_folder_leading_out_is_refused(
    graph: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath, match="outside"):
        graph.write_note("link/x.md", "x")
    assert list(outside.iterdir()) == []


def test_a_symlinked_note_is_not_written_through(graph: ContextGraph, vault: Path) -> None:
    (vault / "alias.md").symlink_to(vault / "seed.md")
    with pytest.raises(UnsafePath, match="symlink"):
        graph.write_note("alias.md", "x", overwrite=True)


def test_the_database_files_are_never_written(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    graph = ContextGraph.open(vault / "g.db.md")
    try:
        graph.sync([vault])
        with pytest.raises(UnsafePath, match="database"):
            graph.write_note("g.db.md", "x", overwrite=True)
        with pytest.raises(UnsafePath, match="database"):
            graph.write_note("g.db.md-wal.md", "x")
    finally:
        graph.close()


def test_content_is_checked_before_anything_is_written(graph: ContextGraph, vault: Path) -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        graph.write_note("x.md", "a\x00b")
    small = ContextGraph(graph.engine, Settings(max_file_bytes=10))
    with pytest.raises(InvalidArgument, match="over 10 bytes"):
        small.write_note("x.md", "x" * 11)
    assert not (vault / "x.md").exists()


def test_with_several_sources_the_source_must_be_named(graph: ContextGraph, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    graph.sync([other])
    with pytest.raises(InvalidArgument, match="several sources"):
        graph.write_note("x.md", "x")
    assert graph.write_note("x.md", "x", source="other").uri == "memory://other/x.md"
    assert graph.write_note("memory://vault/x.md", "y").source == "vault"
    with pytest.raises(NotFound):
        graph.write_note("x.md", "x", source="nope")


def test_writing_with_no_source_registered_says_so(store: ContextGraph) -> None:
    with pytest.raises(NotFound, match="no sources registered"):
        store.write_note("x.md", "x")


# -- titles ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Kafka consumer lag", "Kafka consumer lag.md"),
        ("TCP/IP", "TCP-IP.md"),
        ("../etc/passwd", "etc-passwd.md"),
        ("..", "untitled.md"),
        ("a\\b", "a-b.md"),
        ("nul\x00byte", "nul-byte.md"),
        ("tab\there\nnewline", "tab-here-newline.md"),
        ("CON", "CON_.md"),
        ("con.txt", "con.txt_.md"),
        ("lpt1", "lpt1_.md"),
        ("...hidden", "hidden.md"),
        ("trailing dots...", "trailing dots.md"),
        ("   ", "untitled.md"),
        ('a<b>c:d"e|f?g*h', "a-b-c-d-e-f-g-h.md"),
        ("Café", "Café.md"),
        ("Cafe\u0301", "Café.md"),  # NFD and NFC give one name
        ("日本語のノート", "日本語のノート.md"),
    ],
)
def test_title_to_filename(title: str, name: str) -> None:
    assert title_to_filename(title) == name


def test_a_very_long_title_is_cut_at_a_character_boundary() -> None:
    name = title_to_filename("é" * 500)
    assert len(name.encode("utf-8")) <= 203 and name.endswith(".md")
    name.encode("utf-8").decode("utf-8")  # no half character


@pytest.mark.parametrize(
    "title", ["../../escape", "TCP/IP", "CON", "nul\x00byte", "\u202eevil", "x" * 1000, ".env"]
)
def test_hostile_titles_land_inside_the_root_and_read_back_by_title(
    graph: ContextGraph, vault: Path, title: str
) -> None:
    written = graph.write_note(title, "Body [[Omega]]\n")
    path = vault / written.path
    assert path.parent == vault and path.is_file()
    assert written.concepts == ("omega",)
    printable = " ".join(title.replace("\x00", " ").split())
    assert graph.read(written.uri).title == printable
    if ".." not in title:  # read takes "../.." as a path, and refuses it
        assert graph.read(printable).uri == written.uri


# -- edit ------------------------------------------------------------------------------------


def test_append_and_prepend_keep_frontmatter_first(graph: ContextGraph, vault: Path) -> None:
    graph.write_note("fm.md", "---\ntitle: FM\n---\nBody [[Alpha]]")
    graph.edit_note("fm.md", "append", content="Tail [[Tail]]\n")
    graph.edit_note("FM", "prepend", content="Head [[Head]]")
    text = (vault / "fm.md").read_text()
    assert text == "---\ntitle: FM\n---\nHead [[Head]]\nBody [[Alpha]]\nTail [[Tail]]\n"
    assert set(graph.read("fm.md").concepts) == {"alpha", "head", "tail"}


def test_replace_text_needs_the_expected_count(graph: ContextGraph, vault: Path) -> None:
    graph.write_note("r.md", "[[Old]] and [[Old]] again\n")
    with pytest.raises(InvalidArgument, match="occurs 2 time"):
        graph.edit_note("r.md", "replace_text", find="[[Old]]", replace="[[New]]")
    assert (vault / "r.md").read_text() == "[[Old]] and [[Old]] again\n"
    done = graph.edit_note("r.md", "replace_text", find="[[Old]]", replace="[[New]]", count=2)
    assert done.concepts == ("new",)
    with pytest.raises(InvalidArgument, match="count"):
        graph.edit_note("r.md", "replace_text", find="x", replace="y", count=0)
    with pytest.raises(InvalidArgument, match="find"):
        graph.edit_note("r.md", "replace_text", find="", replace="y")


def test_replace_section_replaces_up_to_the_next_heading_of_its_level(
    graph: ContextGraph, vault: Path
) -> None:
    body = textwrap.dedent(
        """\
        # Title
        intro
        ## Status
        old [[Old]]
        ```
        ## Not a heading
        ```
        ### Detail
        old detail
        ## Next
        kept
        """
    )
    graph.write_note("s.md", body)
    graph.edit_note("s.md", "replace_section", heading="## status", content="new [[New]]")
    expected = "# Title\nintro\n## Status\nnew [[New]]\n\n## Next\nkept\n"
    assert (vault / "s.md").read_text() == expected
    with pytest.raises(NotFound, match="no heading"):
        graph.edit_note("s.md", "replace_section", heading="Not a heading", content="x")
    graph.edit_note("s.md", "append", content="## Next\nagain\n")
    with pytest.raises(InvalidArgument, match="2 headings"):
        graph.edit_note("s.md", "replace_section", heading="Next", content="x")


def test_edit_refusals(graph: ContextGraph, vault: Path) -> None:
    with pytest.raises(InvalidArgument, match="operation must be one of"):
        graph.edit_note("seed.md", "truncate")
    with pytest.raises(InvalidArgument, match="needs content"):
        graph.edit_note("seed.md", "append")
    with pytest.raises(NotFound):
        graph.edit_note("missing.md", "append", content="x")
    with pytest.raises(UnsafePath):
        graph.edit_note("../seed.md", "append", content="x")
    (vault / "latin1.md").write_bytes("caf\xe9 [[X]]\n".encode("latin-1"))
    graph.sync()
    with pytest.raises(InvalidArgument, match="UTF-8"):
        graph.edit_note("latin1.md", "append", content="x")


def test_an_edit_that_changes_nothing_writes_nothing(graph: ContextGraph, vault: Path) -> None:
    before = (vault / "seed.md").stat().st_mtime_ns
    done = graph.edit_note("seed.md", "replace_text", find="Seed", replace="Seed")
    assert done.action == "unchanged"
    assert (vault / "seed.md").stat().st_mtime_ns == before


# -- move and delete -------------------------------------------------------------------------


def test_move_is_a_rename_that_keeps_the_read_time(graph: ContextGraph, vault: Path) -> None:
    read = graph.read("seed.md")
    moved = graph.move_note("seed.md", "archive/2026/seed.md")
    assert moved.action == "moved" and moved.previous_uri == "memory://vault/seed.md"
    assert not (vault / "seed.md").exists() and (vault / "archive/2026/seed.md").exists()
    again = graph.read(moved.uri, now="2020-01-01T00:00:00+00:00")
    assert again.last_accessed == read.last_accessed
    assert {r.name for r in graph.build_context("Alpha").direct_relations} == {"beta"}


def test_move_refusals(graph: ContextGraph, tmp_path: Path) -> None:
    graph.write_note("other.md", "x")
    with pytest.raises(Conflict, match="already exists"):
        graph.move_note("seed.md", "other.md")
    with pytest.raises(UnsafePath):
        graph.move_note("seed.md", "../seed.md")
    with pytest.raises(InvalidArgument, match=r"\.md"):
        graph.move_note("seed.md", "seed.txt")
    with pytest.raises(InvalidArgument, match="within its source"):
        graph.move_note("seed.md", "memory://elsewhere/seed.md")
    assert graph.move_note("seed.md", "memory://vault/seed.md").action == "unchanged"


def test_delete_retracts_the_note_and_its_orphan_concepts(graph: ContextGraph, vault: Path) -> None:
    graph.write_note("lonely.md", "[[Lonely]] [[Alpha]]\n")
    deleted = graph.delete_note("lonely.md")
    assert deleted.action == "deleted" and deleted.concepts == ("alpha", "lonely")
    assert not (vault / "lonely.md").exists()
    assert graph.search("lonely").total == 0
    assert graph.build_context("Lonely").direct_relations == ()
    with pytest.raises(NotFound):
        graph.delete_note("lonely.md")
    assert graph.doctor().ok


def test_result_as_dict_is_json_shaped(graph: ContextGraph) -> None:
    data = graph.write_note("j.md", "[[J]]").as_dict()
    assert data == {
        "action": "created",
        "uri": "memory://vault/j.md",
        "path": "j.md",
        "source": "vault",
        "hash": data["hash"],
        "concepts": ["j"],
        "previousUri": None,
        "warnings": [],
    }


# -- concurrency -----------------------------------------------------------------------------

WRITER = """
import sys
from contextgraph import ContextGraph
graph = ContextGraph.open(sys.argv[1])
for i in range(int(sys.argv[3])):
    graph.write_note(f"{sys.argv[2]}/n{i}.md", f"note {i} [[{sys.argv[2]}]] [[Shared]]\\n")
graph.close()
"""


@pytest.mark.slow
def test_two_processes_writing_different_notes_lose_nothing(
    graph: ContextGraph, db_path: Path, vault: Path, tmp_path: Path
) -> None:
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_path), name, "40"], env=env, cwd=tmp_path
        )
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    for name in ("left", "right"):
        assert len(list((vault / name).glob("*.md"))) == 40
    assert graph.search("note").total == 80
    shared = {r.name: r.co_occurrence_count for r in graph.build_context("Shared").direct_relations}
    assert shared == {"left": 40, "right": 40}
    fresh = ContextGraph.open(tmp_path / "fresh.db")
    fresh.sync([vault])
    assert snapshot(graph) == snapshot(fresh)
    fresh.close()


# -- the sync invariant, through the write API -----------------------------------------------

NAMES = ["a.md", "b.md", "sub/c.md", "sub/deep/d.md"]
CONCEPTS = ["Alpha", "beta", "Gamma Ray", "alpha", "Delta"]
links = st.lists(st.sampled_from(CONCEPTS), max_size=4).map(
    lambda cs: " ".join(f"[[{c}]]" for c in cs)
)
operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), links),
    st.tuples(st.just("append"), st.sampled_from(NAMES), links),
    st.tuples(st.just("prepend"), st.sampled_from(NAMES), links),
    st.tuples(st.just("replace"), st.sampled_from(NAMES), links),
    st.tuples(st.just("section"), st.sampled_from(NAMES), links),
    st.tuples(st.just("move"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
)


def _run(graph: ContextGraph, op: tuple[str, str, str]) -> None:
    action, name, arg = op
    try:
        if action == "write":
            graph.write_note(name, f"# Top\nText {arg}\n## Part\nmore\n", overwrite=True)
        elif action == "append":
            graph.edit_note(name, "append", content=arg)
        elif action == "prepend":
            graph.edit_note(name, "prepend", content=arg)
        elif action == "replace":
            graph.edit_note(name, "replace_text", find="Text", replace=f"Text {arg}")
        elif action == "section":
            graph.edit_note(name, "replace_section", heading="Part", content=arg)
        elif action == "move":
            graph.move_note(name, arg)
        else:
            graph.delete_note(name)
    except (NotFound, Conflict, InvalidArgument):
        pass  # the note is missing, the target taken, the text absent: a refusal changes nothing


@pytest.mark.slow
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operation, min_size=1, max_size=12))
def test_after_any_writes_the_store_equals_a_from_scratch_sync(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, str]]
) -> None:
    base = tmp_path_factory.mktemp("w")
    vault = base / "vault"
    vault.mkdir()
    live = ContextGraph.open(base / "live.db")
    live.sync([vault], name="v")
    for op in ops:
        _run(live, op)
    fresh = ContextGraph.open(base / "fresh.db")
    fresh.sync([vault], name="v")
    try:
        assert snapshot(live) == snapshot(fresh)
        assert live.doctor().ok
        again = live.sync().as_dict()["files"]  # a full sync after the writes finds nothing to do
        assert (again["added"], again["updated"], again["deleted"], again["renamed"]) == (0,) * 4
    finally:
        fresh.close()
        live.close()


def test_a_conflict_names_the_expected_hash_on_one_line(graph: ContextGraph) -> None:
    """The hash a caller passed is echoed in the refusal; a line break in it must not split
    the CLI's one-line error."""
    with pytest.raises(Conflict) as caught:
        graph.write_note("seed.md", "mine", overwrite=True, expected_hash="a\nb\x1b[31m")
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert "seed.md" in str(caught.value)


def test_the_note_tools_never_change_a_code_file(store: ContextGraph, vault: Path) -> None:
    """Paths of the write tools must end in .md (SPEC §14); a code file of a synced source is
    readable, but edit, move and delete refuse it and leave it as it was."""
    code = vault / "app.py"
    code.write_text("def main():\n    return 1\n", encoding="utf-8")
    (vault / "note.md").write_text("[[App]]\n", encoding="utf-8")
    store.sync([vault])
    assert store.read("app.py").content.startswith("def main")
    calls = {
        "edit": lambda: store.edit_note("app.py", "append", content="# more"),
        "move to .md": lambda: store.move_note("app.py", "app.md"),
        "move by title": lambda: store.move_note("app", "moved.md"),
        "delete": lambda: store.delete_note("memory://vault/app.py"),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidArgument, match="not a note"):
            call()
        assert code.read_text(encoding="utf-8") == "def main():\n    return 1\n", name
    assert not (vault / "app.md").exists() and not (vault / "moved.md").exists()
    assert store.read("app.py").path == "app.py"
