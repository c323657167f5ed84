"""scripts/long_vault.py: a vault of joined notes, the same bytes every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import REPO, run_script


def test_each_note_joins_two_notes_of_the_source_in_numbered_copies(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / ".hidden").mkdir()
    (source / "a.md").write_bytes(b"A [[x]]")
    (source / "sub" / "b.md").write_bytes(b"---\ntitle: B\n---\nB")
    (source / "c.txt").write_bytes(b"not a note")
    (source / ".hidden" / "h.md").write_bytes(b"hidden")
    out = tmp_path / "out"
    result = run_script("long_vault", str(source), str(out), "--notes", "3")
    assert result == {"notes": 3, "source_notes": 2, "out": str(out)}
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["copy0/a.md", "copy0/sub/b.md", "copy1/a.md"]
    b_text = b"---\ntitle: B\n---\nB"
    assert (out / "copy0" / "a.md").read_bytes() == b"A [[x]]\n\n" + b_text  # (0*7+1+0) % 2
    assert (out / "copy0" / "sub" / "b.md").read_bytes() == b_text + b"\n\nA [[x]]"  # (1*7+1) % 2
    assert (out / "copy1" / "a.md").read_bytes() == b"A [[x]]\n\nA [[x]]"  # (0*7+1+1) % 2


def test_an_existing_output_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text("note")
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "long_vault.py"), str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "exists: give a new folder" in done.stderr
