"""Retrieval (SPEC §13): a question in, the files and notes it needs out, with reasons.

Every test runs on both engines (SPEC §15).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from contextgraph import ContextGraph, InvalidArgument, NotFound
from contextgraph.cli import cli
from contextgraph.limits import MAX_QUERY_CHARS, RETRIEVE_BUDGET_TOKENS, RETRIEVE_K
from contextgraph.store import db
from contextgraph.store.models import metadata

pytestmark = pytest.mark.engines("sqlite", "postgresql")

LOGGER = '''"""The logger every module uses."""


class Logger:
    """Write a line to the log."""

    def info(self, message):
        print(message)
'''


def write_code_base(root: Path) -> Path:
    """auth/service.py uses tokens/validator.py; every module imports the logging hub."""
    files = {
        "app/logging.py": LOGGER,
        "auth/service.py": (
            "from app.logging import Logger\n"
            "from tokens.validator import TokenValidator\n\n\n"
            "class AuthenticationService:\n"
            '    """Log users in."""\n\n'
            "    def login(self, user, token):\n"
            "        Logger().info(user)\n"
            "        return TokenValidator().check(token)\n"
        ),
        "tokens/validator.py": (
            "from app.logging import Logger\n\n\n"
            "class TokenValidator:\n"
            '    """Check that a bearer token is signed and not expired."""\n\n'
            "    def check(self, token):\n"
            "        Logger().info('checking')\n"
            "        return token.startswith('ok')\n"
        ),
    }
    for i in range(12):  # unrelated modules that all import the hub
        files[f"misc/module{i}.py"] = (
            f"from app.logging import Logger\n\n\ndef job{i}():\n    Logger().info('job {i}')\n"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        (path.parent / "__init__.py").touch()
    return root


@pytest.fixture
def code(store: ContextGraph, tmp_path: Path) -> ContextGraph:
    store.sync([write_code_base(tmp_path / "code")])
    return store


def test_the_seed_story_finds_the_service_and_its_validator_not_the_hub(
    code: ContextGraph,
) -> None:
    result = code.retrieve("how does AuthenticationService validate tokens")
    top = [item.path for item in result.items[:2]]
    assert set(top) == {"auth/service.py", "tokens/validator.py"}
    assert "app/logging.py" not in top
    assert all(item.kind == "code" for item in result.items)


def test_items_say_why_and_carry_an_excerpt_of_the_relevant_symbols(code: ContextGraph) -> None:
    result = code.retrieve("how does AuthenticationService validate tokens")
    service = next(i for i in result.items if i.path == "auth/service.py")
    validator = next(i for i in result.items if i.path == "tokens/validator.py")
    assert service.uri == "memory://code/auth/service.py" and service.source == "code"
    assert any(w.startswith("matches") and "AuthenticationService" in w for w in service.why)
    assert "class AuthenticationService" in service.excerpt
    assert "class TokenValidator" in validator.excerpt
    assert any("imported by auth/service.py" in w for w in validator.why)
    assert [i.rank for i in result.items] == list(range(1, len(result.items) + 1))
    assert [i.score for i in result.items] == sorted((i.score for i in result.items), reverse=True)


def test_graph_neighbours_come_in_though_they_share_no_word(code: ContextGraph) -> None:
    # Nothing in logging.py says "login" or "service": it comes in through the import graph.
    result = code.retrieve("AuthenticationService login", k=20)
    paths = [i.path for i in result.items]
    assert paths[0] == "auth/service.py"
    assert "app/logging.py" in paths and "tokens/validator.py" in paths
    hub = next(i for i in result.items if i.path == "app/logging.py")
    assert not any(w.startswith("matches") for w in hub.why)


def test_the_pack_respects_the_token_budget(code: ContextGraph) -> None:
    full = code.retrieve("Logger info job", k=10, budget_tokens=RETRIEVE_BUDGET_TOKENS.high)
    assert not full.truncated
    assert full.tokens == sum(-(-len(i.excerpt) // 4) for i in full.items)
    small = code.retrieve("Logger info job", k=10, budget_tokens=RETRIEVE_BUDGET_TOKENS.low)
    assert small.truncated and small.tokens <= RETRIEVE_BUDGET_TOKENS.low
    assert small.items[0].excerpt  # the first item always keeps an excerpt
    assert [i.path for i in small.items] == [i.path for i in full.items]  # same ranking
    assert any(not i.excerpt for i in small.items[1:])


def test_the_first_excerpt_is_cut_to_fit_a_tiny_budget(store: ContextGraph, vault: Path) -> None:
    (vault / "long.md").write_text("alpha " * 2000, encoding="utf-8")
    store.sync([vault])
    result = store.retrieve("alpha", budget_tokens=RETRIEVE_BUDGET_TOKENS.low)
    assert result.truncated and result.items[0].excerpt
    assert result.tokens <= RETRIEVE_BUDGET_TOKENS.low


def test_notes_come_with_the_notes_that_link_the_same_concepts(
    store: ContextGraph, vault: Path
) -> None:
    (vault / "auth.md").write_text(
        "# Auth\n\nHow login works: see [[Token Validation]] and [[Sessions]].\n", "utf-8"
    )
    (vault / "tokens.md").write_text(
        "# Tokens\n\nWe sign every bearer token; [[Token Validation]] checks expiry.\n", "utf-8"
    )
    (vault / "cooking.md").write_text("# Soup\n\nBoil water. [[Recipes]]\n", "utf-8")
    store.sync([vault])
    result = store.retrieve("how does login work")
    paths = [i.path for i in result.items]
    assert paths[0] == "auth.md"
    assert "tokens.md" in paths and "cooking.md" not in paths
    tokens = next(i for i in result.items if i.path == "tokens.md")
    assert tokens.kind == "note"
    assert any("[[token-validation]]" in w and "auth.md" in w for w in tokens.why)
    assert "Token Validation" in tokens.excerpt


def test_a_database_holding_notes_and_code_returns_both(
    store: ContextGraph, tmp_path: Path, vault: Path
) -> None:
    (vault / "design.md").write_text(
        "# Token checks\n\nThe TokenValidator rejects expired tokens. [[Auth]]\n", "utf-8"
    )
    store.sync([vault])
    store.sync([write_code_base(tmp_path / "code")])
    result = store.retrieve("TokenValidator expired tokens")
    kinds = {i.path: i.kind for i in result.items}
    assert kinds.get("design.md") == "note" and kinds.get("tokens/validator.py") == "code"
    only_code = store.retrieve("TokenValidator expired tokens", source="code")
    assert {i.source for i in only_code.items} == {"code"}


def test_a_source_keeps_out_the_notes_a_shared_concept_links_elsewhere(
    store: ContextGraph, tmp_path: Path
) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder in (mine, theirs):
        folder.mkdir()
    (mine / "backlinks.md").write_text("Backlinks in the graph view. [[Graph]]\n", "utf-8")
    (mine / "other.md").write_text("Unrelated words. [[Graph]]\n", "utf-8")
    (theirs / "far.md").write_text("Far away. [[Graph]]\n", "utf-8")
    for i in range(8):  # notes without the concept: it is not linked by every note
        (mine / f"plain{i}.md").write_text(f"Plain note {i}. [[Topic {i}]]\n", "utf-8")
    store.sync([mine, theirs])
    everywhere = {i.source for i in store.retrieve("backlinks graph view", k=10).items}
    assert everywhere == {"mine", "theirs"}  # the concept reaches the other source's note
    only = store.retrieve("backlinks graph view", k=10, source="mine")
    assert {i.source for i in only.items} == {"mine"} and only.items


def test_as_dict_is_the_spec_shape(code: ContextGraph) -> None:
    data = code.retrieve("TokenValidator", k=3).as_dict()
    assert set(data) == {"query", "k", "budgetTokens", "tokens", "truncated", "items"}
    assert data["k"] == 3 and len(data["items"]) <= 3
    assert set(data["items"][0]) == {
        "rank",
        "uri",
        "path",
        "source",
        "kind",
        "score",
        "why",
        "excerpt",
    }
    json.dumps(data)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_is_an_error(code: ContextGraph, query: str) -> None:
    with pytest.raises(InvalidArgument, match="give a question"):
        code.retrieve(query)


@pytest.mark.parametrize("query", ["the of and", "???", "((( )))", "is it"])
def test_only_stopwords_or_punctuation_give_an_empty_result(code: ContextGraph, query: str) -> None:
    result = code.retrieve(query)
    assert result.items == () and result.tokens == 0 and not result.truncated


def test_a_huge_query_is_refused_clearly(code: ContextGraph) -> None:
    with pytest.raises(InvalidArgument, match=f"at most {MAX_QUERY_CHARS}"):
        code.retrieve("x" * 1_000_000)


def test_k_and_budget_are_bounded(code: ContextGraph) -> None:
    for k in (RETRIEVE_K.low - 1, RETRIEVE_K.high + 1):
        with pytest.raises(InvalidArgument, match="k must be between"):
            code.retrieve("token", k=k)
    for budget in (RETRIEVE_BUDGET_TOKENS.low - 1, RETRIEVE_BUDGET_TOKENS.high + 1):
        with pytest.raises(InvalidArgument, match="budget_tokens must be between"):
            code.retrieve("token", budget_tokens=budget)
    with pytest.raises(NotFound, match="no source named 'nosuch'"):
        code.retrieve("token", source="nosuch")


def _every_row(graph: ContextGraph) -> dict[str, list[str]]:
    """Every row of every table (read times included), as sortable text."""
    with db.read(graph.engine) as conn:
        return {
            table.name: sorted(repr(tuple(row)) for row in conn.execute(table.select()))
            for table in metadata.sorted_tables
        }


def test_retrieve_never_writes(code: ContextGraph) -> None:
    before = _every_row(code)
    sqlite = code.engine.dialect.name == "sqlite"
    if sqlite:
        with db.read(code.engine) as conn:
            version = conn.exec_driver_sql("PRAGMA data_version").scalar()
            changes = conn.exec_driver_sql("SELECT total_changes()").scalar()
    code.retrieve("how does AuthenticationService validate tokens")
    assert _every_row(code) == before
    if sqlite:
        with db.read(code.engine) as conn:
            assert conn.exec_driver_sql("SELECT total_changes()").scalar() == changes
            assert conn.exec_driver_sql("PRAGMA data_version").scalar() == version


def test_the_cli_prints_json_and_text(code: ContextGraph, db_url: str) -> None:
    runner = CliRunner()
    args = ["--db", db_url, "retrieve", "how does AuthenticationService validate tokens"]
    result = runner.invoke(cli, [*args, "--json", "--k", "3"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert {i["path"] for i in data["items"][:2]} == {"auth/service.py", "tokens/validator.py"}
    text = runner.invoke(cli, args)
    assert text.exit_code == 0 and "1. memory://code/" in text.stdout
    assert "tokens of excerpts" in text.stdout


@pytest.mark.parametrize(
    "args",
    [["   "], ["x", "--k", "0"], ["x", "--k", "51"], ["x", "--budget-tokens", "5"]],
)
def test_the_cli_reports_bad_arguments_as_usage_errors(
    code: ContextGraph, db_url: str, args: list[str]
) -> None:
    result = CliRunner().invoke(cli, ["--db", db_url, "retrieve", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_a_code_excerpt_finds_its_symbols_past_form_feeds(
    store: ContextGraph, tmp_path: Path
) -> None:
    root = tmp_path / "ff"
    root.mkdir()
    body = '\n\n\ndef zebra_quokka():\n    """Find the zebra quokka target."""\n    return 1\n'
    (root / "paged.py").write_text("import os\n" + "\f\n" * 5 + body, encoding="utf-8")
    store.sync([root])
    (item,) = store.retrieve("zebra quokka target", k=1).items
    assert "def zebra_quokka():" in item.excerpt and "Find the zebra quokka" in item.excerpt


def test_of_two_notes_a_concept_reaches_the_fresh_one_ranks_first(
    store: ContextGraph, vault: Path
) -> None:
    """SPEC §4, §13: notes reached through a concept carry their decay weights."""
    notes = {
        "seed.md": ("2026-11-25", "The platypus migration plan links [[Kappa]]."),
        "a-old.md": ("2016-01-01", "Ancient remarks about [[Kappa]] here."),
        "b-new.md": ("2026-11-26", "Current remarks about [[Kappa]] here."),
        "f1.md": (None, "filler [[X1]] [[X2]]"),
        "f2.md": (None, "filler [[X2]] [[X3]]"),
    }
    for name, (created, body) in notes.items():
        head = f"---\ncreated: {created}\n---\n" if created else ""
        (vault / name).write_text(head + body + "\n", encoding="utf-8")
    store.sync([vault])
    items = {i.uri.rsplit("/", 1)[-1]: i.score for i in store.retrieve("platypus migration").items}
    assert items["b-new.md"] > items["a-old.md"] > 0
    ranked = [u for u in items if u in ("a-old.md", "b-new.md")]
    assert ranked == ["b-new.md", "a-old.md"]


def test_a_code_excerpt_shows_each_line_once(store: ContextGraph, vault: Path) -> None:
    (vault / "pkg").mkdir()
    (vault / "pkg" / "nullfile.py").write_text(
        "class NullFile:\n    def close(self):\n        pass\n\n    def flush(self):\n"
        "        pass\n\n\ndef helper():\n    return NullFile()\n",
        encoding="utf-8",
    )
    store.sync([vault])
    (item,) = [i for i in store.retrieve("NullFile close").items if i.uri.endswith(".py")]
    for signature in ("class NullFile:", "def close(self):", "def flush(self):"):
        assert item.excerpt.count(signature) == 1, item.excerpt
