"""sources: registering root folders under unique names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from contextgraph import db
from contextgraph.errors import InvalidArgument, NotFound, SourceError
from contextgraph.sources import get_source, list_sources, register


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(tmp_path / "graph.db")
    db.upgrade(engine)
    yield engine
    engine.dispose()


def test_a_folder_is_registered_under_its_basename_once(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    folder.mkdir()
    first = register(engine, folder)
    assert (first.name, first.root) == ("vault", folder.resolve())
    assert register(engine, folder) == first  # idempotent
    with db.read(engine) as conn:
        assert list_sources(conn) == [first]
        assert get_source(conn, "vault") == first


def test_a_name_used_by_another_folder_is_refused(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "a" / "notes").mkdir(parents=True)
    (tmp_path / "b" / "notes").mkdir(parents=True)
    register(engine, tmp_path / "a" / "notes")
    with pytest.raises(SourceError, match="'notes' is already used for"):
        register(engine, tmp_path / "b" / "notes")
    other = register(engine, tmp_path / "b" / "notes", name="b-notes")
    assert other.name == "b-notes"


def test_bad_roots_and_names_are_one_line_errors(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a folder"):
        register(engine, tmp_path / "missing")
    (tmp_path / "ok").mkdir()
    for bad in ("a/b", " padded ", "tab\there"):
        with pytest.raises(InvalidArgument, match="invalid source name"):
            register(engine, tmp_path / "ok", name=bad)
    with db.read(engine) as conn, pytest.raises(NotFound, match="no source named 'nosuch'"):
        get_source(conn, "nosuch")
