"""The frontmatter read without the YAML parser gives exactly what the loader gives."""

from __future__ import annotations

from datetime import date
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.notes import frontmatter
from contextgraph.notes.frontmatter import _simple_mapping, load_yaml, read_frontmatter
from contextgraph.notes.wikilinks import extract_note

# Words the YAML 1.1 resolver takes for something other than a string, and some it does not.
TRICKY = [
    "yes", "No", "ON", "off", "true", "False", "null", "Null", "~", "y", "n", "012", "0", "7",
    "0x1F", "0b101", "1_000", "1:20", "190:20:30", "1.5", "1e3", "1.0e+3", ".inf", ".NaN", "-1",
    "+1", "2023-01-01", "2023-02-30", "2023-1-1", "2023-01-01 10:00", "2023-01-01t10:00:00z",
    "Note 0", "a  b", "a, b", "x/y (z)", "=", "<<", "-", "a#b", "a #b", "'q'", "\"q\"",
    "''", '""', "'a: b # c'", "'it''s'", "'x'y'", "'\\n'", '"\\n"', '"\\"', "'yes'", '"1.5"',
    "'caf\u00e9'", "'a' # c", '"a"b"', "' x '",
]  # fmt: skip
KEYS = ["title", "created", "on", "12", "Yes", "null", "a-b", "_x", "tags", "~", "1.5"]


def _line() -> st.SearchStrategy[str]:
    value = st.one_of(
        st.sampled_from(TRICKY),
        st.text(alphabet="aZ09 ._/()+,-:#'\"\t", min_size=0, max_size=12),
    )
    sep = st.sampled_from([": ", ":", ":  ", ": \t"])
    tail = st.sampled_from(["", " ", "  ", "\t"])
    return st.builds(lambda k, s, v, t: f"{k}{s}{v}{t}", st.sampled_from(KEYS), sep, value, tail)


def _loaded(source: str) -> Any:
    try:
        return load_yaml(source)
    except Exception as exc:  # the fast path must never claim what the loader refuses
        return ("error", type(exc).__name__)


@settings(max_examples=600, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=5))
def test_the_simple_mapping_equals_the_loader_wherever_it_applies(lines: list[str]) -> None:
    source = "\n".join(lines) + "\n"
    fast = _simple_mapping(source)
    if fast is None:
        return
    slow = _loaded(source)
    assert fast == slow
    assert list(fast) == list(slow)
    assert [type(v) for v in fast.values()] == [type(v) for v in slow.values()]


def test_the_common_frontmatter_takes_the_simple_path() -> None:
    source = (
        "title: Note 7\ncreated: 2023-05-06\ncount: 12\nempty:\n"
        "desc: ''\nq: \"1: #x\"\nstub: false\ndraft: Yes\n"
    )
    assert _simple_mapping(source) == {
        "title": "Note 7",
        "created": date(2023, 5, 6),
        "count": 12,
        "empty": None,
        "desc": "",  # Dendron's
        "q": "1: #x",
        "stub": False,  # YAML 1.1's bools, as the loader reads them
        "draft": True,
    }
    for other in ("title: null\n", "title: 1.5\n", "on: x\n", "title: a: b\n", "  title: x\n",
                  "title: x\r\n", "created: 2023-02-30\n", "tags: [a]\n", "title: x",
                  "t: 'it''s'\n", "t: \"a\\\\tb\"\n", "t: 'caf\u00e9'\n"):  # fmt: skip
        assert _simple_mapping(other) is None, other


def test_read_frontmatter_is_unchanged_by_the_simple_path(monkeypatch: Any) -> None:
    notes = [
        "---\ntitle: Note 7\ncreated: 2023-05-06\n---\nbody",
        "---\ntitle: 12\ncreated: 1690000000000\n---\n",
        "---\ntitle: x\ncreated: 2023-02-30\n---\n",
        "---\ntitle: Note\ncreated: soon\n---\n",
        "---\ntitle:\ncreated:\n---\n",
        "---\nid: b0fe6ef7\ntitle: 'Dendron: M'\ndesc: ''\nupdated: 1660951930114\n---\n",
    ]
    fast = [read_frontmatter(n) for n in notes]
    monkeypatch.setattr(frontmatter, "_simple_mapping", lambda source: None)
    assert fast == [read_frontmatter(n) for n in notes]


def test_a_value_keeps_its_inner_spaces_and_loses_its_trailing_ones() -> None:
    assert _simple_mapping("title: a b  c   \nx: y\n") == {"title": "a b  c", "x": "y"}
    # No split of the spaces between the value and the trailing run is tried in turn: 50,000
    # spaces before a colon took the old pattern about 7 s to refuse.
    line = "title: a" + " " * 50_000 + ":\n"
    assert _simple_mapping(line) is None
    assert _simple_mapping(line) == _simple_mapping("title: a :\n")


def test_an_integer_past_pythons_digit_limit_is_a_warning_not_a_failure() -> None:
    note = "---\ncreated: " + "1" * 5000 + "\n---\nbody [[a]]\n"
    facts = extract_note(note)
    assert facts.concepts == {"a": 1}
    assert len(facts.warnings) == 1 and facts.warnings[0].startswith("invalid YAML frontmatter")
