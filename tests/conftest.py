"""Shared fixtures: every test gets its own HOME and database; nothing touches a real home."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import NOW, Writer
from hypothesis import settings as hypothesis_settings

from contextgraph import ContextGraph
from contextgraph.settings import Settings

# CI runs the property tests on a fixed sequence of examples (no flakes on a shared machine);
# locally every run explores new ones.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CONTEXTGRAPH_DB", str(tmp_path / "env.db"))
    for name in list(os.environ):
        if name.startswith(("CONTEXTGRAPH_", "MAENIFOLD_")) and name != "CONTEXTGRAPH_DB":
            monkeypatch.delenv(name)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "graph.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ContextGraph]:
    """A fresh database file with the default settings and a fixed clock."""
    graph = ContextGraph.open(db_path, settings=Settings.from_env(now=_now()))
    yield graph
    graph.close()


def _now() -> object:
    from contextgraph.settings import parse_datetime

    return parse_datetime(NOW)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def write(vault: Path) -> Writer:
    """Write a note into the vault: ``write("a.md", "text", created="2026-11-01")``."""

    def _write(rel: str, body: str, *, created: str | None = None, root: Path = vault) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(body)
        if created is not None:
            text = f"---\ncreated: {created}\n---\n{text}"
        path.write_text(text, encoding="utf-8")
        return path

    return _write
