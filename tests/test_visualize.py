from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import Writer

from contextgraph import ContextGraph, InvalidArgument
from contextgraph.cli import cli


def test_visualize_draws_the_neighbourhood_with_counts_and_communities(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Q]] [[A]] [[B]]")
    write("b.md", "[[Q]] [[A]]")
    write("c.md", "[[A]] [[Far]]")
    store.sync([vault])
    chart = store.visualize("Q", depth=2)
    assert chart.startswith("flowchart")
    assert 'n1["q"]' in chart
    assert '---|"2"|' in chart
    assert '"far"' in chart
    assert "subgraph" in chart
    one_hop = store.visualize("Q", depth=1)
    assert '"far"' not in one_hop


def test_unknown_concept_draws_only_itself(store: ContextGraph) -> None:
    chart = store.visualize("Nobody")
    assert 'n1["nobody"]' in chart and "---" not in chart


@pytest.mark.parametrize(("depth", "max_nodes"), [(0, 30), (6, 30), (2, 4), (2, 101)])
def test_out_of_range_arguments_are_errors(store: ContextGraph, depth: int, max_nodes: int) -> None:
    with pytest.raises(InvalidArgument):
        store.visualize("q", depth=depth, max_nodes=max_nodes)


def test_never_more_than_max_nodes(store: ContextGraph, vault: Path, write: Writer) -> None:
    for i in range(30):
        write(f"n{i}.md", f"[[Q]] [[C{i}]] [[C{(i + 1) % 30}]]")
    store.sync([vault])
    chart = store.visualize("Q", max_nodes=10)
    assert len(re.findall(r"\bn\d+\[", chart)) == 10


def test_visualize_command(store: ContextGraph, db_path: Path, vault: Path, write: Writer) -> None:
    write("a.md", "[[Q]] [[A]]")
    store.sync([vault])
    result = CliRunner().invoke(cli, ["--db", str(db_path), "visualize", "Q", "--depth", "9"])
    assert result.exit_code == 2 and "--depth" in result.stderr  # a usage error (SPEC §10)
    result = CliRunner().invoke(cli, ["--db", str(db_path), "visualize", "Q"])
    assert result.exit_code == 0 and result.stdout.startswith("flowchart")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": 0}, "depth must be between 1 and 5, not 0"),
        ({"max_nodes": 101}, "max_nodes must be between 5 and 100, not 101"),
        ({"depth": True}, "depth must be a whole number"),
    ],
)
def test_visualize_checks_the_shared_bounds(
    store: ContextGraph, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        store.visualize("q", **kwargs)
