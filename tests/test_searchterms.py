"""The index side of code-aware search (graph.searchterms): same spellings, found cheaply.

``compound_words`` finds identifier runs from a quick scan for case boundaries and inner
underscores; it must find exactly what the plain definition (one lookahead regex over every
run, below) finds, in the same order, since the index text and so the search ranking depend
on it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.graph.searchterms import (
    MAX_PARTS_CHARS,
    body_start,
    camel_parts,
    compound_words,
    display_title,
    first_heading,
    identifier_parts,
    meta_terms,
    meta_terms_of,
    spellings,
)

# The definition: a maximal run of identifier characters holding an underscore between two
# letters or digits, or a case boundary (aB, a1B, ABc).
REFERENCE = re.compile(
    r"(?<![A-Za-z0-9_])"
    r"(?=[A-Za-z0-9_]*?(?:[A-Za-z0-9]_+[A-Za-z0-9]|[a-z0-9][A-Z]|[A-Z][A-Z][a-z]))"
    r"[A-Za-z0-9_]{2,}"
)


def reference_parts(text: str) -> str:
    seen: dict[str, None] = {}
    size = 0
    for word in dict.fromkeys(REFERENCE.findall(text)):
        pieces = [p for p in word.split("_") if p]
        tokenized = " ".join(p.lower() for p in pieces)
        joined = "".join(p.lower() for p in pieces) if len(pieces) > 1 else None
        split = " ".join(
            part
            for p in pieces
            for part in ([q.lower() for q in re.findall(CAMEL, p)] or [p.lower()])
        )
        for spelling in (joined, split if split != tokenized else None):
            if spelling and spelling not in seen:
                seen[spelling] = None
                size += len(spelling) + 1
        if size > MAX_PARTS_CHARS:
            break
    return "\n".join(seen)


CAMEL = r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+"

# Text made of the characters that matter: cases, digits, underscores, separators, non-ASCII.
_ALPHABET = "aAbBzZ09_ _.-/\n\téÉß" + "ǅ" + "İ"
texts = st.text(alphabet=_ALPHABET, max_size=80) | st.text(max_size=40)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_compound_words_match_the_definition(text: str) -> None:
    assert compound_words(text) == list(dict.fromkeys(REFERENCE.findall(text)))


@settings(max_examples=600, deadline=None)
@given(texts)
def test_identifier_parts_match_the_definition(text: str) -> None:
    assert identifier_parts(text) == reference_parts(text)


def test_examples() -> None:
    text = "Use TokenValidator and token_validator, not plain words; get_HTTPServer. _x_ a_"
    assert compound_words(text) == ["TokenValidator", "token_validator", "get_HTTPServer"]
    assert identifier_parts(text).split("\n") == [
        "token validator",
        "tokenvalidator",
        "gethttpserver",
        "get http server",
    ]
    assert compound_words("prose only, Capitalised Words. HTTP and I/O") == []
    assert compound_words("ABc aB1 a1B __init__ x__y AB") == ["ABc", "aB1", "a1B", "x__y"]
    assert identifier_parts("") == ""


def test_the_cached_helpers_give_fresh_lists() -> None:
    parts = camel_parts("HTTPServerV2")
    assert parts == ["http", "server", "v2"]
    parts.append("mutated")
    assert camel_parts("HTTPServerV2") == ["http", "server", "v2"]
    assert spellings("get_HTTPServer") == ("get httpserver", "gethttpserver", "get http server")


def test_a_word_with_letters_beyond_ascii_is_one_part_and_highlighted_whole() -> None:
    from contextgraph.graph.ftsquery import query_terms
    from contextgraph.graph.snippet import Highlighter

    assert camel_parts("ÅNGSTRÖM") == ["ångström"]
    assert camel_parts("naïveParser") == ["naïveparser"]
    body = "This mentions [[Café]] and [[machine_learning]] and [[ÅNGSTRÖM]]."
    spans = Highlighter(query_terms("ångström")).spans(body)
    assert [body[a:b] for a, b in spans] == ["ÅNGSTRÖM"]


def test_a_huge_text_is_cut_after_max_parts_chars() -> None:
    text = " ".join(f"wordNumber{i}x" for i in range(40_000))
    assert identifier_parts(text) == reference_parts(text)
    assert len(identifier_parts(text)) <= MAX_PARTS_CHARS + 100


def test_meta_terms_unchanged_for_a_note_and_a_code_path() -> None:
    assert meta_terms("docs/HowTo.md", "# Getting Started\nbody", None).split("\n") == [
        "docs HowTo md",
        "Getting Started",
        "docs",
        "howto",
        "how to",
        "md",
    ]


def reference_meta_words(path: str, symbols: tuple[str, ...]) -> list[str]:
    """The words meta_terms gives after the path and heading lines: every spelling of every
    identifier (two or more of ``[A-Za-z0-9_]``) in the path's pieces, then the symbols'."""
    words: dict[str, None] = {}
    for name in [*re.split(r"[/.]", path), *symbols]:
        for word in re.findall(r"[A-Za-z0-9_]{2,}", name):
            words.update(dict.fromkeys(s for s in spellings(word) if s))
    return list(words)


paths = st.lists(
    st.sampled_from(["/", ".", "a", "ab", "Foo", "getHTTP", "_x", "md", "x1", "é", " "]),
    max_size=12,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(paths, min_size=1, max_size=4), st.lists(paths, max_size=2))
def test_meta_terms_give_every_path_and_symbol_word_once_in_order(
    many: list[str], symbols: list[str]
) -> None:
    # Several paths in one run: a folder's words are cached, and must come out the same
    # whichever file of it asks first.
    for path in many:
        lines = meta_terms_of(path, None, symbols).split("\n")
        assert lines[0] == path.replace("/", " ").replace(".", " ")
        assert lines[1:] == reference_meta_words(path, tuple(symbols))


# The definition of a note's first heading: an ATX heading line, the first from the body's start.
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
headed = st.text(alphabet="#- \t\r\nab.", max_size=60) | st.text(max_size=30)


@settings(max_examples=600, deadline=None)
@given(headed)
def test_first_heading_matches_the_definition(text: str) -> None:
    match = HEADING.search(text, body_start(text))
    assert first_heading(text) == (match.group(1).strip() if match else None)


def test_first_heading_examples() -> None:
    assert first_heading("# Title\nbody") == "Title"
    assert first_heading("---\ntitle: x\n---\n## Second #\n# Later") == "Second"
    assert first_heading("text #not a heading\n#nospace\n\n### Third\r\n") == "Third"
    assert first_heading("---\n# in frontmatter\n---\nno heading") is None
    assert first_heading("") is None


def test_one_search_per_compound_run_however_many_hints_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run such as a 10 MB "aAaA…" holds millions of case boundaries; each pattern must search
    # once per run (and once more to find none), not once per boundary.
    from contextgraph.graph import searchterms

    calls = []

    class Counting:
        def __init__(self, pattern: re.Pattern[bytes]) -> None:
            self.pattern = pattern

        def search(self, *args: object) -> re.Match[bytes] | None:
            calls.append(args[1:])
            return self.pattern.search(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(searchterms, "_HINTS", tuple(Counting(p) for p in searchterms._HINTS))
    text = "aA" * 5000 + " x_y_z " + "Ab" * 3000 + " plain words"
    assert compound_words(text) == ["aA" * 5000, "x_y_z", "Ab" * 3000]
    assert len(calls) <= 2 * (3 + 1)


def test_a_long_heading_of_hashes_is_read_in_one_pass() -> None:
    # The definition's lazy group backtracks over such a line once per character (a 16 kB line
    # took 0.9 s, a 1 MB one would take hours); first_heading reads it in one pass.
    line = "# " + "# " * 32_000 + "x"
    assert first_heading(line + "\nbody") == "# " * 32_000 + "x"
    assert first_heading("# " * 32_000 + "\n## Next") == "#"
    assert first_heading("#  \n") == ""
    assert first_heading("# \n## b") == "b"  # one blank and nothing after: not a heading


@pytest.mark.parametrize(
    ("text", "heading"),
    [
        ("```bash\n# install deps first\n```\nbody\n\n# Real Heading\n", "Real Heading"),
        ("<!--\n# hidden heading\n-->\nbody\n", None),
        ("~~~~\n# x\n~~~\n# still code\n~~~~\n# Out\n", "Out"),
        ("```\n# never closed\n", None),
        ("<!-- one line -->\n# After a comment\n", "After a comment"),
        ("    ```\n# After indented code\n", "After indented code"),  # no fence: code block
        ("---\ntitle: x\n---\n```md\n## Summary\n```\n", None),
    ],
)
def test_a_hash_line_in_a_code_fence_or_comment_is_no_heading(
    text: str, heading: str | None
) -> None:
    assert first_heading(text) == heading
    assert display_title(None, text, "a/note.md") == (heading or "note")
