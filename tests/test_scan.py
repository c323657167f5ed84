"""scan: which files of a source are notes, code or configs, and which are passed over."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextgraph.code import CODE_EXTENSIONS, CONFIG_FILENAMES
from contextgraph.sync.scan import NOTE_EXTENSIONS, file_kind, holds_at_least, scan


def _paths(root: Path, **kwargs: object) -> dict[str, str]:
    return {f.path: f.kind for f in scan(root, **kwargs).files}  # type: ignore[arg-type]


def test_file_kinds_come_from_the_name() -> None:
    assert file_kind("a.md") == "note"
    assert file_kind("A.MD") == "note"
    assert file_kind("x.py") == "code"
    assert file_kind("x.tsx") == "code"
    assert file_kind("tsconfig.json") == "config"
    assert file_kind("picture.png") is None
    assert file_kind("notes.txt") is None


def _kind_by_splitext(name: str) -> str | None:
    if name in CONFIG_FILENAMES:
        return "config"
    suffix = os.path.splitext(name)[1].lower()
    if suffix in NOTE_EXTENSIONS:
        return "note"
    return "code" if suffix in CODE_EXTENSIONS else None


@given(st.text(alphabet=".amdpyMDPYj s", max_size=8) | st.sampled_from(sorted(CONFIG_FILENAMES)))
def test_file_kind_takes_the_suffix_as_splitext_does(name: str) -> None:
    assert file_kind(name) == _kind_by_splitext(name)
    for edge in ("..md", ".md", "...", "a.", "a..md", ".a.md", "x.tar.py", "a.md.", "..x.md"):
        assert file_kind(edge) == _kind_by_splitext(edge)


@given(st.lists(st.text(alphabet=".amdpyMDPYj s", min_size=1, max_size=8), max_size=12))
def test_scan_gives_every_file_the_kind_file_kind_gives(names: list[str]) -> None:
    # scan tests the name inline (it runs for every file of every sync): same rules
    names = [n for n in set(names) if n not in (".", "..")]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in names:
            (root / name).write_text("x", encoding="utf-8")
        found = {f.path: f.kind for f in scan(root).files}
    expected = {n: file_kind(n) for n in names if not n.startswith(".")}
    assert found == {n: k for n, k in expected.items() if k is not None}


def test_scan_lists_notes_code_and_configs_with_posix_paths_and_stats(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "a.md").write_text("[[x]]", encoding="utf-8")
    (tmp_path / "sub" / "deeper" / "m.py").write_text("import os\n", encoding="utf-8")
    (tmp_path / "tsconfig.json").write_text("{}", encoding="utf-8")
    (tmp_path / "ignored.txt").write_text("x", encoding="utf-8")
    result = scan(tmp_path)
    assert {f.path: f.kind for f in result.files} == {
        "a.md": "note",
        "sub/deeper/m.py": "code",
        "tsconfig.json": "config",
    }
    note = next(f for f in result.files if f.path == "a.md")
    st = os.stat(tmp_path / "a.md")
    assert (note.size, note.mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert result.problems == []


def test_hidden_dependency_and_virtualenv_folders_are_skipped(tmp_path: Path) -> None:
    for folder in (".git", "node_modules", "__pycache__", "venv", "myenv", "kept", "env"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "n.md").write_text("[[x]]", encoding="utf-8")
    for venv in ("venv", "myenv"):  # a virtual environment is known by its pyvenv.cfg
        (tmp_path / venv / "pyvenv.cfg").write_text("home = /usr", encoding="utf-8")
    (tmp_path / ".hidden.md").write_text("[[x]]", encoding="utf-8")
    # A folder of notes named env (no pyvenv.cfg) is no virtual environment.
    assert _paths(tmp_path) == {"env/n.md": "note", "kept/n.md": "note"}


def test_excluded_paths_such_as_the_database_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a", encoding="utf-8")
    (tmp_path / "graph.md").write_text("a database named like a note", encoding="utf-8")
    assert _paths(tmp_path, exclude=[tmp_path / "graph.md"]) == {"a.md": "note"}


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_links_are_followed_only_inside_the_source_and_loops_end(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "inner").mkdir(parents=True)
    outside.mkdir()
    (root / "inner" / "n.md").write_text("n", encoding="utf-8")
    (outside / "secret.md").write_text("s", encoding="utf-8")
    os.symlink(outside, root / "out")
    os.symlink(root / "inner", root / "again")
    os.symlink(root, root / "inner" / "loop")
    paths = _paths(root)
    assert "out/secret.md" not in paths
    # The one real folder is walked once, under whichever of its two names comes first.
    assert len(paths) == 1 and next(iter(paths)) in ("inner/n.md", "again/n.md")


def test_once_found_is_called_once_when_the_walk_has_found_that_many_files(
    tmp_path: Path,
) -> None:
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
        for i in range(3):
            (tmp_path / folder / f"n{i}.md").write_text("[[x]]", encoding="utf-8")
    seen: list[int] = []
    result = scan(tmp_path, once_found=(4, lambda: seen.append(len(seen))))
    assert seen == [0]  # once, though 5 and 6 files were found after it too
    assert len(result.files) == 9  # and the walk went on to the end
    assert scan(tmp_path) == result  # the same listing as without

    never: list[int] = []
    scan(tmp_path, once_found=(10, lambda: never.append(1)))
    assert never == []


def test_holds_at_least_stops_walking_once_it_has_found_enough(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        for i in range(3):
            (tmp_path / folder / f"n{i}.md").write_text("[[x]]", encoding="utf-8")
    (tmp_path / "a" / "skip.txt").write_text("not ours", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.md").write_text("[[x]]", encoding="utf-8")
    assert holds_at_least([tmp_path], 6)  # the files a scan lists: notes, not .txt or hidden
    assert not holds_at_least([tmp_path], 7)
    assert holds_at_least([tmp_path / "a", tmp_path / "b"], 5)  # counted over the folders
    assert not holds_at_least([tmp_path / "a", tmp_path / "missing"], 4)
    assert holds_at_least([], 0) and not holds_at_least([], 1)
    walked: list[str] = []
    real = os.scandir

    def listing(path: Any) -> Any:
        walked.append(os.path.basename(path))
        return real(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "scandir", listing)
        assert holds_at_least([tmp_path], 2)
    assert "b" not in walked  # "a" held enough: the walk ended there
