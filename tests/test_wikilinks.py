"""contextgraph.notes.wikilinks: one test per rule, real dialects, and differential tests."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import pytest
import yaml
from helpers import first_links_agree
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.common import html_re
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from contextgraph.notes import markdown
from contextgraph.notes.frontmatter import _simple_mapping, body_offset, load_yaml
from contextgraph.notes.links import fast_path_ok, find_links_fast, is_attachment, target_of
from contextgraph.notes.markdown import _comment_end, code_and_comments, find_links_markdown
from contextgraph.notes.wikilinks import (
    ATTACHMENT_EXTENSIONS,
    MAX_CONCEPT_LENGTH,
    Frontmatter,
    Link,
    LinkIndex,
    NoteFacts,
    extract_note,
    find_links,
    is_valid_concept,
    normalize,
    parse_frontmatter,
)

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
T = TypeVar("T")


def concepts(text: str) -> dict[str, int]:
    return extract_note(text).concepts


def markdown_it_survives(parse: Callable[[str], T], text: str) -> T:
    """Run a markdown-it based function; skip the example if markdown-it itself crashes.

    markdown-it-py 4.3.0 raises IndexError in ``StateBlock.getLines`` for a few inputs such as
    ``"> - <pre>\\n>"``; there is no reference to compare with then.
    """
    try:
        return parse(text)
    except IndexError:
        assume(False)
        raise


def parsed_links(text: str, *, code_in_links: bool = True) -> list[Link]:
    """The links markdown-it's reading of ``text`` gives (the path for notes with code)."""
    start = body_offset(text)
    return markdown_it_survives(
        lambda t: find_links_markdown(t, start, code_in_links=code_in_links), text
    )


def implementations_agree(text: str) -> list[Link]:
    """Return find_links(text) after checking that the fast path, where taken, agrees."""
    parsed = parsed_links(text)
    start = body_offset(text)
    if fast_path_ok(text, start):
        assert find_links_fast(text, start) == parsed
    assert find_links(text) == parsed
    return parsed


# --------------------------------------------------------------------------------------------
# Link syntax and what is ignored
# --------------------------------------------------------------------------------------------


def test_plain_and_embedded_links_are_found_with_offsets() -> None:
    text = "See [[Alpha]] and ![[Beta]]."
    links = implementations_agree(text)
    assert [(text[link.start : link.end], link.embed) for link in links] == [
        ("[[Alpha]]", False),
        ("![[Beta]]", True),
    ]
    assert [link.concept for link in links] == ["alpha", "beta"]


def test_wikilinks_in_fenced_code_are_ignored() -> None:
    text = "[[a]]\n\n```\n[[b]]\n```\n\n~~~python\n[[c]]\n~~~\n\n[[d]]\n"
    implementations_agree(text)
    assert concepts(text) == {"a": 1, "d": 1}


def test_unclosed_fence_hides_the_rest_of_the_document() -> None:
    text = "[[a]]\n\n```\n[[b]]\n\n[[c]]\n"
    assert concepts(text) == {"a": 1}


def test_wikilinks_in_indented_code_are_ignored() -> None:
    text = "Para [[a]].\n\n    [[b]] is code\n\n\t[[c]] too\n\n- item\n\n      [[d]] code in item\n"
    implementations_agree(text)
    assert concepts(text) == {"a": 1}


def test_indented_line_continuing_a_paragraph_is_not_code() -> None:
    text = "Para [[a]]\n    [[b]] continues it\n"
    implementations_agree(text)
    assert concepts(text) == {"a": 1, "b": 1}


def test_wikilinks_in_inline_code_are_ignored() -> None:
    text = (
        "Use `[[a]]` or ``x ` [[b]]`` but [[c]].\n\n"
        "An unmatched ` keeps [[d]].\n\n"
        "Escaped \\`[[e]]` opens no span; inside one, \\ is literal: `\\`[[f]]`\n"
    )
    implementations_agree(text)
    assert concepts(text) == {"c": 1, "d": 1, "e": 1, "f": 1}


def test_inline_code_can_span_lines_of_a_paragraph() -> None:
    text = "Start `code\n[[a]] still code` then [[b]]\n\n`not closed\n\n[[c]]`\n"
    implementations_agree(text)
    assert concepts(text) == {"b": 1, "c": 1}


def test_wikilinks_in_html_comments_and_blocks_are_ignored() -> None:
    text = (
        "Text <!-- [[a]] --> and [[b]].\n\n"
        "<!--\n[[c]]\n\n[[d]]\n-->\n\n"
        "<div>\n[[e]]\n</div>\n\n"
        "After [[f]] <span>[[g]]</span>\n"
    )
    implementations_agree(text)
    assert concepts(text) == {"b": 1, "f": 1, "g": 1}


def test_wikilinks_in_frontmatter_are_ignored() -> None:
    text = "---\ntitle: About [[a]]\nrelated: '[[b]]'\n---\nBody [[c]]\n"
    implementations_agree(text)
    assert concepts(text) == {"c": 1}


def test_triple_bracket_is_no_link() -> None:
    text = "[[[x]]] [[[y]] [[z]]] [x[[w]] ] [[ok]]"
    implementations_agree(text)
    assert concepts(text) == {"w": 1, "ok": 1}


def test_inner_text_has_no_brackets_or_line_breaks() -> None:
    assert concepts("[[a\nb]] [[a[b]] [[a]b]] [[c]]") == {"c": 1}


def test_empty_links_are_dropped_and_counted() -> None:
    facts = extract_note("[[]] and [[ ]] and [[#Heading]] and [[ok]]")
    assert facts.concepts == {"ok": 1}
    assert facts.dropped == 3


# --------------------------------------------------------------------------------------------
# Target rules
# --------------------------------------------------------------------------------------------


def test_alias_is_cut_at_first_pipe() -> None:
    (link,) = find_links("[[Machine Learning|ML|x]]")
    assert (link.target, link.concept) == ("Machine Learning", "machine-learning")


def test_escaped_pipe_in_table_counts_as_pipe() -> None:
    text = "| a | b |\n|---|---|\n| [[Note\\|alias]] | [[a\\|b]] |\n"
    links = implementations_agree(text)
    assert [(link.target, link.concept) for link in links] == [("Note", "note"), ("a", "a")]


def test_heading_and_block_refs_are_cut() -> None:
    text = "[[Note#Heading]] [[Note#^block-id]] [[Other#Part|alias]] [[x.md#h]]"
    assert concepts(text) == {"note": 2, "other": 1, "x": 1}


def test_trailing_hash_is_kept() -> None:
    assert concepts("[[C#]] and [[F# ]] and [[C#|the language]]") == {"c#": 2, "f#": 1}


def test_md_suffix_dropped() -> None:
    links = find_links("[[note.md]] [[Other Note.MD|x]] [[node.js]] [[a.md.md]]")
    assert [link.target for link in links] == ["note", "Other Note", "node.js", "a.md"]


def test_attachments_are_not_concepts() -> None:
    text = "![[y.png]] [[Doc.PDF]] ![[clip.Mp4|200]] [[board.canvas]] [[draw.excalidraw]] [[ok]]"
    facts = extract_note(text)
    assert facts.concepts == {"ok": 1}
    assert facts.dropped == 0  # attachments are not counted as dropped
    assert {"png", "pdf", "mp4", "canvas", "excalidraw"} <= ATTACHMENT_EXTENSIONS
    assert [link.concept for link in find_links(text)][:5] == [""] * 5


def test_normalisation_examples() -> None:
    for name in ("Machine Learning", "machine_learning", " Machine  Learning ", "machine-learning"):
        assert normalize(name) == "machine-learning"
    assert normalize("C#") == "c#"
    assert normalize("Node.js") == "node.js"
    assert normalize("GPT-4") == "gpt-4"
    assert normalize("a/b\\c") == "a-b-c"
    assert normalize("a - _ b") == "a-b"
    assert normalize("--x--") == "x"
    assert normalize(" _/ ") == ""
    assert normalize("") == ""


def test_normalisation_is_unicode_nfc() -> None:
    nfd = unicodedata.normalize("NFD", "Café Crème")
    assert nfd != "Café Crème"
    assert normalize(nfd) == normalize("Café Crème") == "café-crème"
    assert concepts(f"[[{nfd}]] [[Café Crème]]") == {"café-crème": 2}


def test_names_over_200_chars_are_dropped_and_counted() -> None:
    ok = "a" * MAX_CONCEPT_LENGTH
    too_long = "b" * (MAX_CONCEPT_LENGTH + 1)
    facts = extract_note(f"[[{ok}]] [[{too_long}]] [[{too_long}|alias]]")
    assert facts.concepts == {ok: 1}
    assert facts.dropped == 2
    assert is_valid_concept(ok)
    assert not is_valid_concept(too_long)
    assert not is_valid_concept(" _ ")
    assert normalize(too_long) == too_long  # normalize itself does not apply the limit


def test_mention_counts() -> None:
    text = "[[A]] [[a]] [[ A ]] [[A|x]] ![[A]] [[b]] [[A#h]]\n\n```\n[[A]]\n```\n"
    facts = extract_note(text)
    assert facts.concepts == {"a": 6, "b": 1}
    assert list(facts.concepts) == ["a", "b"]  # order of first appearance


def test_concepts_keep_order_of_first_appearance() -> None:
    assert list(concepts("[[z]] [[y]] [[z]] [[x]]")) == ["z", "y", "x"]


# --------------------------------------------------------------------------------------------
# Frontmatter
# --------------------------------------------------------------------------------------------


def test_frontmatter_title_created_and_body_start() -> None:
    text = "---\ntitle: My Note\ncreated: 2021-03-04\n---\n# Body\n"
    fm = parse_frontmatter(text)
    assert fm == Frontmatter("My Note", datetime(2021, 3, 4, tzinfo=UTC), 43, None)
    assert text[fm.body_start :] == "# Body\n"
    facts = extract_note(text)
    assert (facts.title, facts.created, facts.body_start) == (fm.title, fm.created, 43)


def test_bad_yaml_frontmatter_is_a_warning() -> None:
    text = "---\ntitle: [unclosed\n  : : :\n---\nBody [[x]] and [[y]]\n"
    fm = parse_frontmatter(text)
    assert fm.title is None and fm.created is None
    assert fm.warning is not None and fm.warning.startswith("invalid YAML frontmatter: ")
    assert text[fm.body_start :] == "Body [[x]] and [[y]]\n"
    facts = extract_note(text)
    assert facts.warnings == (fm.warning,)
    assert facts.concepts == {"x": 1, "y": 1}


def test_frontmatter_that_is_not_a_mapping_is_skipped_with_a_warning() -> None:
    text = "---\n- a\n- [[b]]\n---\n[[c]]\n"
    fm = parse_frontmatter(text)
    assert fm.warning == "invalid YAML frontmatter: not a mapping (list)"
    assert concepts(text) == {"c": 1}


def test_unclosed_frontmatter_is_no_frontmatter() -> None:
    text = "---\ntitle: x\n[[a]]\n"
    fm = parse_frontmatter(text)
    assert fm == Frontmatter(None, None, 0, None)
    assert concepts(text) == {"a": 1}


def test_frontmatter_closes_with_dots_and_allows_trailing_blanks() -> None:
    text = "---  \ntitle: t\n... \t\n[[a]]"
    assert parse_frontmatter(text).title == "t"
    assert concepts(text) == {"a": 1}


def test_empty_frontmatter_has_no_warning() -> None:
    assert parse_frontmatter("---\n---\nbody") == Frontmatter(None, None, 8, None)


def test_created_date_and_datetime() -> None:
    def created(value: str) -> datetime | None:
        return parse_frontmatter(f"---\ncreated: {value}\n---\n").created

    assert created("2021-03-04") == datetime(2021, 3, 4, tzinfo=UTC)
    assert created("2021-03-04 10:20:30") == datetime(2021, 3, 4, 10, 20, 30, tzinfo=UTC)
    assert created("2021-03-04T10:20:30+02:00") == datetime(2021, 3, 4, 8, 20, 30, tzinfo=UTC)
    assert created("'2021-03-04T10:20:30Z'") == datetime(2021, 3, 4, 10, 20, 30, tzinfo=UTC)
    assert created("'2021-03-04'") == datetime(2021, 3, 4, tzinfo=UTC)
    for value in ("'2021-03-04 10:20'", "2021-03-04T10:20:30-05:00"):
        result = created(value)
        assert result is not None and result.tzinfo is UTC


def test_unusable_created_is_a_warning() -> None:
    for value, fragment in (
        ("true", "unsupported type bool"),  # (integers are epoch times, as Dendron writes)
        ("yesterday", "not an ISO-8601 date"),
        ("[2021]", "unsupported type list"),
    ):
        fm = parse_frontmatter(f"---\ntitle: T\ncreated: {value}\n---\n")
        assert fm.created is None and fm.title == "T"
        assert fm.warning is not None and fragment in fm.warning


def test_title_is_a_string_of_any_scalar() -> None:
    assert parse_frontmatter("---\ntitle: 42\n---\n").title == "42"
    assert parse_frontmatter("---\ntitle: 'yes'\n---\n").title == "yes"
    assert parse_frontmatter("---\ntitle: yes\n---\n").title == "True"
    fm = parse_frontmatter("---\ntitle: [a, b]\n---\n")
    assert fm.title is None and fm.warning is not None


def test_invalid_dates_in_any_key_make_the_yaml_invalid() -> None:
    fm = parse_frontmatter("---\ntitle: T\nupdated: 2021-02-30\n---\n")
    assert fm.title is None
    assert fm.warning is not None and fm.warning.startswith("invalid YAML frontmatter")


def test_deeply_nested_frontmatter_is_refused_quickly() -> None:
    text = "---\nx: " + "[" * 5000 + "]" * 5000 + "\ntitle: t\n---\n[[a]]"
    fm = parse_frontmatter(text)
    assert fm.title is None and fm.warning is not None
    assert concepts(text) == {"a": 1}


# --------------------------------------------------------------------------------------------
# Real dialects and encodings
# --------------------------------------------------------------------------------------------


def test_foam_reference_definition_footer_does_not_hide_links() -> None:
    text = (
        "# Footnotes\n\nSee [[wikilinks]] and [[block-anchors]].\n\n"
        '[wikilinks]: wikilinks.md "Wikilinks"\n'
        '[block-anchors]: block-anchors.md "Block Anchors"\n'
    )
    implementations_agree(text)
    assert concepts(text) == {"wikilinks": 1, "block-anchors": 1}


def test_link_reference_definition_changes_what_follows() -> None:
    # After a definition an indented line is code (markdown-it's reference rule), not text.
    text = "[x]: url\n    [[code]]\n\n[[x]]\n"
    implementations_agree(text)
    assert concepts(text) == {"x": 1}


def test_dendron_alias_first_links_yield_the_label() -> None:
    # We follow Obsidian: the target is before the pipe, so Dendron's [[label|target]]
    # gives the label as concept.
    text = "Join [[Dendron Discord|dendron://dendron.dendron-site/community.discord.channels]]."
    assert concepts(text) == {"dendron-discord": 1}


def test_dendron_note_refs_are_cut_at_the_hash() -> None:
    text = "![[dendron.topic.links#hovers,1:#*]]\n![[dendron://vault/asset.preview#tutorial,1]]\n"
    links = implementations_agree(text)
    assert [(link.target, link.embed) for link in links] == [
        ("dendron.topic.links", True),
        ("dendron://vault/asset.preview", True),
    ]
    assert [link.concept for link in links] == [
        "dendron.topic.links",
        "dendron:-vault-asset.preview",
    ]


def test_logseq_properties_and_page_tags() -> None:
    text = (
        "title:: Page embed\ntype:: [[Feature]]\nplatforms:: [[All Platforms]]\n\n"
        "- Embed a page with {{embed [[Page]]}}\n\t- nested [[Child Page]] tag\n"
        "\t\t- `[[not a link]]` and [[]]\n"
    )
    implementations_agree(text)
    facts = extract_note(text)
    assert facts.concepts == {"feature": 1, "all-platforms": 1, "page": 1, "child-page": 1}
    assert facts.dropped == 1


def test_crlf_and_lone_cr_line_endings() -> None:
    lf = "---\ntitle: T\n---\n[[a]]\n    [[c]]\n\n```\n[[b]]\n```\n\n    [[d]]\n\n[[e]]\n"
    for newline in ("\r\n", "\r"):
        text = lf.replace("\n", newline)
        links = implementations_agree(text)
        assert [text[link.start : link.end] for link in links] == ["[[a]]", "[[c]]", "[[e]]"]
        facts = extract_note(text)
        assert (facts.title, facts.concepts) == ("T", {"a": 1, "c": 1, "e": 1})


def test_bom_is_ignored() -> None:
    text = "\ufeff---\ntitle: T\n---\n[[a]]"
    assert parse_frontmatter(text).title == "T"
    assert concepts(text) == {"a": 1}
    assert concepts("\ufeff    [[code]]\n\n[[b]]") == {"b": 1}
    links = find_links("\ufeff[[x]]")
    assert (links[0].start, links[0].end) == (1, 6)


def test_empty_and_blank_files() -> None:
    for text in ("", "\n", "   \n\t\n", "\ufeff"):
        assert extract_note(text) == NoteFacts({}, None, None, 0, (), 0)
        assert find_links(text) == []


def test_no_exception_reaches_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextgraph.notes.wikilinks as wikilinks

    text = "`x`\n\n```\n[[code]]\n```\n\n    [[indented]]\n\n[[a]]"
    assert [link.concept for link in find_links(text)] == ["a"]

    def fail(text: str, start: int | None = None) -> list[Link]:
        raise IndexError("as markdown-it-py 4.3.0 does on '> - <pre>\\n>'")

    monkeypatch.setattr(wikilinks, "find_links_markdown", fail)
    assert [link.concept for link in find_links(text)] == ["code", "indented", "a"]


def test_nul_characters_do_not_break_offsets() -> None:
    text = "a\0b `x` [[c\0d]] [[e]]\n"
    links = implementations_agree(text)
    assert [text[link.start : link.end] for link in links] == ["[[c\0d]]", "[[e]]"]


# --------------------------------------------------------------------------------------------
# Properties of normalize
# --------------------------------------------------------------------------------------------

names = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"), st.sampled_from(" \t_/\\-İßẞǅΣ\u0301\u00a0\u3000")
    ),
    max_size=40,
)


@given(names)
def test_normalize_is_idempotent(name: str) -> None:
    once = normalize(name)
    assert normalize(once) == once


@given(names)
def test_normalized_names_have_no_separators_at_the_ends_or_doubled(name: str) -> None:
    out = normalize(name)
    assert not any(ch.isspace() or ch in "_/\\" for ch in out)
    assert not out.startswith("-") and not out.endswith("-")
    assert "--" not in out
    assert unicodedata.is_normalized("NFC", out)


# --------------------------------------------------------------------------------------------
# Differential test against an independent reference: markdown-it's FULL parse
# --------------------------------------------------------------------------------------------
#
# The reference decides what is code/HTML with markdown-it's own block AND inline parsers:
# links are searched in the text of `inline` tokens, rebuilt from their children (code spans
# and HTML comments become line breaks, which no link can cross; other inline HTML and
# emphasis markers keep their source text), plus in source lines that belong to no leaf block
# (link reference definitions).  So code spans, escapes and inline HTML are found by
# markdown-it's inline rules here, while the implementation under test uses a block parse and
# its own masker.  The generated documents contain no `(`, `&` or backslash before a bracket,
# and a core rule empties the reference definitions before the inline pass, so that inline
# links and entities never rewrite the bracket text; what remains of the text is identical.
# (Real notes do contain inline links: their destinations are put back into the text, since
# a wikilink there counts, as in Logseq's `[label]([[page]])`.)

_REF_MD = MarkdownIt("commonmark")
# markdown-it's comment pattern but its first alternative (``<!-->``, ``<!--->``), which
# markdown._html_inline leaves to markdown-it.
_SHORT_COMMENT, _LONG_COMMENT = html_re.comment.split("|", 1)
_COMMENT_RE = re.compile(_LONG_COMMENT)


def _forget_definitions(state: StateCore) -> None:
    state.env["references"] = {}


_REF_MD.core.ruler.after("block", "forget_definitions", _forget_definitions)
_LEAVES = {"paragraph_open", "heading_open", "fence", "code_block", "html_block", "hr"}
_UNESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")
_REF_LINK_RE = re.compile(r"(!?)(?<!\[)\[\[([^\[\]\n\r]*)\]\](?!\])")


def _inline_text(children: list[Token]) -> str:
    out = []
    hrefs: list[str] = []
    for tok in children:
        if tok.type in ("text", "text_special"):
            out.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak", "code_inline"):
            out.append("\n")
        elif tok.type == "html_inline":
            out.append("\n" if tok.content.startswith("<!--") else tok.content)
        elif tok.type == "link_open":  # (only in the corpus test) keep the destination:
            hrefs.append(unquote(str(tok.attrs.get("href", ""))))  # Logseq's [label]([[page]])
            out.append("<" if tok.markup == "autolink" else "[")
        elif tok.type == "link_close":
            href = hrefs.pop()
            out.append(">" if tok.markup == "autolink" else f"]({href})")
        elif tok.type == "image":
            src = unquote(str(tok.attrs.get("src", "")))
            out.append(f"![{_inline_text(tok.children or [])}]({src})")
        else:
            out.append(tok.markup)
    return "".join(out)


def reference_links(text: str) -> Counter[tuple[bool, str]]:
    """(embed, target) of every link, per markdown-it's full parse."""
    body = text[body_offset(text) :]
    tokens = markdown_it_survives(_REF_MD.parse, body)
    pieces = [_inline_text(tok.children or []) for tok in tokens if tok.type == "inline"]
    covered: set[int] = set()
    for tok in tokens:
        if tok.type in _LEAVES and tok.map:
            covered.update(range(*tok.map))
    lines = re.split(r"\r\n|\r|\n", body)
    pieces += [line for i, line in enumerate(lines) if i not in covered]
    found: Counter[tuple[bool, str]] = Counter()
    for piece in pieces:
        for m in _REF_LINK_RE.finditer(piece):
            found[(bool(m.group(1)), target_of(m.group(2)))] += 1
    return found


def implementation_links(text: str) -> Counter[tuple[bool, str]]:
    """(embed, target) of every link, as a plain CommonMark reading (no code inside links)."""
    found: Counter[tuple[bool, str]] = Counter()
    for link in parsed_links(text, code_in_links=False):
        raw = text[link.start : link.end]
        assert raw.startswith("![[" if link.embed else "[[") and raw.endswith("]]")
        # markdown-it's text tokens have backslash escapes resolved; ours keep them.
        found[(link.embed, _UNESCAPE_RE.sub(r"\1", link.target))] += 1
    return found


PIECES = [
    "```", "~~~", "``", "`", "\\`", "    ", "  ", " ", "\t", "> ", ">", "- ", "* ", "+ ",
    "1. ", "2) ", "# ", "## ", "***", "---", "===", "<!-- ", " -->", "-->", "<div>", "</div>",
    "<span>", "<x-y a='1'>", "<script>", "</script>", "<?php ", "?>", "<!X ", "<![CDATA[",
    "]]>", "[[x]]", "[[a|b]]", "[[a\\|b]]", "![[y.png]]", "[[Foo Bar]]", "[[z#h]]", "[[]]",
    "[[", "]]", "[", "]", "!", "|", "*", "_", "text", "word. ", "\n", "\n", "\n\n", "\n    ",
    "\n> ", "\n- ", "\n```\n", "[x]: url", '[x]: x.md "X"', "[x]:\n  url", "[x]",
]  # fmt: skip

documents = st.builds(
    lambda prefix, pieces, newline: prefix + "".join(pieces).replace("\n", newline),
    st.sampled_from(["", "", "---\ntitle: t\n---\n", "\ufeff"]),
    st.lists(st.sampled_from(PIECES), max_size=40),
    st.sampled_from(["\n", "\n", "\r\n", "\r"]),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_links_agree_with_the_full_markdown_it_reference(text: str) -> None:
    assert implementation_links(text) == reference_links(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_fast_and_markdown_paths_agree(text: str) -> None:
    implementations_agree(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_code_inside_links_only_adds_links_that_hold_a_code_span(text: str) -> None:
    plain = {(link.start, link.end) for link in parsed_links(text, code_in_links=False)}
    full = {(link.start, link.end) for link in parsed_links(text)}
    assert plain <= full
    for start, end in full - plain:
        assert "`" in text[start:end]


INLINE_PIECES = [
    "`", "``", "\\`", "[[x]]", "![[y]]", "[[a|b]]", "text ", "\n", "\n\n", "> ", "- ", "1. ",
    "  ", "# ", "<span>", "</span>", "<a\nhref='x'>", "<a title='`'>", "<http://x.y/`>",
    "<?p `?>", "[", "]", "!", "***", "===",
]  # fmt: skip


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(INLINE_PIECES), max_size=40))
def test_inline_code_and_html_agree_with_the_reference(pieces: list[str]) -> None:
    text = "".join(pieces)
    implementations_agree(text)
    assert implementation_links(text) == reference_links(text)


LINKING_PIECES = [
    "[a](", "](", "[", "]", "(", ")", "`", "``", "\\", "x", " ", "<", ">", "!", "[x]", "[y]",
    "<!--", "-->", "&#96;", "*", "_", "\n", '"', "[[x]]", "[a](`", "`)", "\\`", "[x]`", "<a`>",
    "[`b`]",
]  # fmt: skip
# Every inline rule of the commonmark preset: the reference for the rules markdown.py runs.
_EVERY_INLINE_RULE = MarkdownIt("commonmark").inline.ruler.get_active_rules()


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LINKING_PIECES), max_size=40), st.booleans())
@example(["[a](`", "x", "`)", " [[x]] `"], False)  # a backtick in a link's destination is its own
@example(["[x]", "[`b`]", " [[x]] `"], True)  # so is one in a full reference's label
@example(["\\`", "x", "`"], False)  # an escaped backtick opens nothing
def test_the_inline_rules_left_off_never_move_a_code_span_or_comment(
    pieces: list[str], defined: bool
) -> None:
    """markdown.py parses a paragraph with only the inline rules that can move a code span or
    an HTML comment, and without link rules where no link can be: the same ranges as with every
    rule of the preset on."""
    content = "".join(pieces)
    env: dict[str, Any] = {}
    if defined:  # link references, as a block parse of a note defining them leaves in env
        MarkdownIt("commonmark").parse("[x]: /u\n[`b`]: /v\n", env)
    found = code_and_comments(content, dict(env))
    every = markdown._inline_rules(MarkdownIt("commonmark"), _EVERY_INLINE_RULE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(markdown, "_MD", every)
        patch.setattr(markdown, "_PLAIN", every)
        assert found == code_and_comments(content, dict(env))


def test_inline_code_across_lines_and_fences_in_lists() -> None:
    text = "# [[a]] `[[b]]`\n\n- item `x` [[c]]\n- `multi\n  line [[d]]` [[e]]\n"
    implementations_agree(text)
    assert concepts(text) == {"a": 1, "c": 1, "e": 1}
    text = "- [[a]]\n```js\n[[b]]\n````\n```\n[[c]]\n~~~\n```\n\n`[[d]]` [[e]]\n```"
    implementations_agree(text)
    assert concepts(text) == {"a": 1, "e": 1}
    text = "- [[a]]\n  ```\n  [[b]]\n  ```\n[[c]]\n"
    implementations_agree(text)
    assert concepts(text) == {"a": 1, "c": 1}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```\n\n- a\n\n[[x]]\n\n```\n[[y]]", {"y"}),  # a fence across parts
        ("text\n\n```\n\n- [[x]]\n\nfoo\n\n[[y]]", set()),  # unclosed: to the end
        ("<div>\n- [[x]]\n\n[[y]] `z`", {"y"}),  # an HTML block ends at a blank line only
        ("<pre>\n\n- [[x]]\n\n</pre>\n[[y]] `a`", {"y"}),  # <pre> at its end tag only
        ("- a\n\n    [[code]]\n- [[b]] `c`", {"code", "b"}),  # in the item: no code
        ("text\n\n    [[code]]\n\n- [[b]] `c`", {"b"}),  # indented code
        ("- a\n```\n- [[x]]\n```\n- [[y]] `q`", {"y"}),  # a top-level fence in a list
        ("- a\n  ```\n- [[x]]\n  ```\n- [[y]] `q`", {"x", "y"}),  # the item's fence ends
        # A definition in a part of its own still counts: with [y] defined, `[x][y]` is a link
        # and `(`a[[d]]`)` a code span; without, `[y](`a[[d]]`)` is one and d links.
        ("[x][y](`a[[d]]`) `b`\n\n[y]: /u\n\n- [[e]]", {"e"}),
        ("[x][y](`a[[d]]`) `b`\n\n- [[e]]", {"d", "e"}),
    ],
)
def test_a_note_is_parsed_in_parts_that_start_afresh(text: str, expected: set[str]) -> None:
    implementations_agree(text)
    assert set(concepts(text)) == expected


LINE_STARTS = ["", "", "", "- ", "* ", "1. ", "  ", "    ", "\t", "\t- ", "> ", "# ", "```", "~~~",
               "<div>", "<pre>", "</pre>", "<!-- ", "-->", "---", "[x]: url"]  # fmt: skip
LINE_PIECES = ["[[a]]", "[[b|c]]", "![[d]]", "`", "``", "text ", "<span>", "<!-- ", "-->", "*"]

notes_in_parts = st.lists(
    st.builds(
        lambda start, pieces, blank: start + "".join(pieces) + ("\n" if blank else ""),
        st.sampled_from(LINE_STARTS),
        st.lists(st.sampled_from(LINE_PIECES), max_size=4),
        st.booleans(),
    ),
    max_size=30,
).map("\n".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes_in_parts)
def test_notes_of_many_parts_agree_with_the_full_markdown_it_reference(text: str) -> None:
    """Long notes of lines, lists and blank lines: the parse in parts (markdown.py) meets a
    fresh start at every part and must give what one parse of the whole note gives."""
    implementations_agree(text)
    assert implementation_links(text) == reference_links(text)


FENCE_LINES = ["```", "````", "~~~", "~~~~", "```py", "``` `x`", "~~~ `x`", "   ```", "    ```",
               "\t```", "``` ", "```\t", "- a", "- ```", "  ```", "   ~~~", "1. b", "> q", "> ```",
               "text", "`code`", "<div>", "[r]: /u", "", "", ""]  # fmt: skip


def _fenced_note(lines: list[tuple[str, int]]) -> str:
    """Lines with a link numbered by its line: after the line's text (0), on a line of its own
    after it (1), or none (2)."""
    out = []
    for n, (line, link) in enumerate(lines):
        out.append(f"{line} [[l{n}]]" if link == 0 else line)
        if link == 1:
            out.append(f"[[m{n}]]")
    return "\n".join(out)


fenced_notes = st.lists(
    st.tuples(st.sampled_from(FENCE_LINES), st.sampled_from([0, 1, 2, 2, 2])), max_size=30
).map(_fenced_note)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fenced_notes)
@example("```\n\n```\n[[a]]")  # a link after a fence that closed in a later part
@example("``` `x`\n\n```\n[[a]]\n\n```")  # a backtick in the info string: no fence
@example("- a\n  ```\n\n```\n[[a]]")  # a fence in a list item ends with it
@example("text\n\n```\n\n~~~\n[[a]]\n````\n[[b]]")  # closed by its own marker, as long
@example("```\n\n    ```\n\ntext [[a]]")  # indented four spaces: code, not the closing line
@example("    ```\n\n[[a]]")  # indented code, not a fence
def test_fences_across_parts_agree_with_the_full_markdown_it_reference(text: str) -> None:
    """Fenced code blocks whose code holds blank lines, so that they span parts, among list
    items, block quotes and links: what ``contextgraph.notes.fences`` follows without
    markdown-it must give what one parse of the whole note gives."""
    implementations_agree(text)
    assert implementation_links(text) == reference_links(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(documents, notes_in_parts))
def test_first_links_read_as_far_as_needed_agree_with_the_whole_note(text: str) -> None:
    first_links_agree(text)


@pytest.mark.parametrize(
    "text",
    [
        # a fence opened before a blank line holds the first [[a]]; the real one comes after
        "```\n[[a]]\n\nstill code\n```\n\n[[a]] here\n",
        # so does an HTML comment, and an HTML block up to its blank line
        "<!--\n[[a]]\n\n-->\n\n[[a]]\n",
        "<div>\n[[a]]\n\n[[a]] after\n",
        # a link reference anywhere: the note is read whole
        "[b `[[a]]` c]\n\n[[a]]\n\n[b `[[a]]` c]: /url\n",
        # indented code, an embed, a link in a code span, CRLF lines, frontmatter
        "    [[a]]\n\n![[a]]\n",
        "`[[a]]` then\n\nplain [[a]]\n",
        "[[a]] one\r\n\r\n[[b]] two\r\n",
        "---\ntitle: '[[a]]'\n---\n\n[[a]]\n",
        # many parts: later questions read on, at least doubling
        "".join(f"p{i} [[c{i}]]\n\n" for i in range(40)),
    ],
)
def test_first_links_of_hard_notes_agree_with_the_whole_note(text: str) -> None:
    first_links_agree(text)


def test_a_first_link_early_in_a_long_note_reads_no_further() -> None:
    text = "Intro [[a]].\n\n" + "".join(f"`code` [[c{i}]]\n\n" for i in range(2000))
    index = LinkIndex(text)
    assert index.first("a") == 6
    assert index.read == text.index("`code`")  # the first paragraph and its blank line
    assert index.first("c1999") == text.index("[[c1999]]")
    assert index.read == len(text)


def test_a_code_span_wholly_inside_a_link_is_part_of_it() -> None:
    """SPEC §2 (issue 10 item 8): Obsidian's help vault writes these in 66 files."""
    assert concepts("See [[Functions#hasTag|`hasTag`]].") == {"functions": 1}
    assert concepts("See [[Filter#`wikilink`|Wiki-Link]].") == {"filter": 1}
    assert concepts("- [[`code` name]] and ![[`x`]]") == {"`code`-name": 1, "`x`": 1}
    text = "> x [[A|`b`]] y\r\n> [[C]]"
    links = implementations_agree(text)
    assert [(text[link.start : link.end], link.concept) for link in links] == [
        ("[[A|`b`]]", "a"),
        ("[[C]]", "c"),
    ]


def test_code_spans_that_cross_a_link_boundary_still_win() -> None:
    assert concepts("`[[x]]` and `a [[b]]`") == {}  # a `[[` inside a code span links nothing
    assert concepts("`a [[b` c]]") == {}  # the span starts before the link
    assert concepts("[[a`]] `b`") == {}  # the span starts inside the link and ends after it
    assert concepts("[[a<!-- x -->b]] [[c]]") == {"c": 1}  # comments are never part of a link


def test_escaped_brackets_are_no_link() -> None:
    assert concepts("\\[\\[x\\]\\] and \\[\\[`y`\\]\\] and `z`") == {}
    assert concepts("\\[[x]] `y`") == {"x": 1}  # only the brackets themselves count


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["[[a]]", "[[b|c]]", "x ", "\n", "\n\n", "> ", "- "]), max_size=30))
def test_fast_path_is_taken_for_code_free_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert fast_path_ok(text, body_offset(text))
    implementations_agree(text)


def _counted(text: str) -> tuple[dict[str, int], int]:
    """Concept counts and dropped links of ``text``, counted from :func:`find_links`'s links."""
    concepts: dict[str, int] = {}
    dropped = 0
    for link in find_links(text):
        if link.concept:
            concepts[link.concept] = concepts.get(link.concept, 0) + 1
        elif not is_attachment(link.target):
            dropped += 1
    return concepts, dropped


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_extract_note_counts_exactly_the_links_find_links_finds(text: str) -> None:
    """The fast count (no Link objects) gives the same counts, in the same order, and drops."""
    facts = extract_note(text.removeprefix("\ufeff"))
    concepts, dropped = _counted(text.removeprefix("\ufeff"))
    assert list(facts.concepts.items()) == list(concepts.items())
    assert facts.dropped == dropped


# --------------------------------------------------------------------------------------------
# Differential test of the frontmatter loader against yaml.safe_load
# --------------------------------------------------------------------------------------------

KEYS = ["title", "created", "id", "desc", "tags", "Title", "title x", "a.b", "updated", "yes"]
VALUES = [
    "", "Dendron", "My Note: sub", "a: b", "C#", "a #c", "#c", "foo:bar", "x:", "'quoted'",
    "''", "'it''s'", "'a' 'b'", '"dq"', '"esc \\u00e9 \\U0001F332 \\x41"', '"bad \\q"',
    '"a"b"', "2021-01-02", "2021-02-30", "2021-01-02 10:00:00", "2021-01-02T10:00:00Z",
    "2021-1-2", "1595952505017", "0x1F", "017", "1_000", "1:20", "1.5", "-1", ".inf",
    "yes", "No", "null", "~", "[a, b]", "[]", "[a, [b]]", "[a, 'b']", "{a: 1}", "- a",
    "&anchor x", "*alias", "!tag x", "|", ">-", "%x", "@x", "`x`", "a  b ", "ü", "\u00e9t\u00e9",
]  # fmt: skip
CONTINUATIONS = ["  more text", "  - item", "  - ", "  key: value", "    deeper: 1", "  ", "",
                 "# comment", "  # comment", "- top", "   odd: 1", "  |"]  # fmt: skip

frontmatters = st.lists(
    st.one_of(
        st.builds(
            lambda k, v: f"{k}: {v}".rstrip(" ") if v else f"{k}:",
            st.sampled_from(KEYS),
            st.sampled_from(VALUES),
        ),
        st.sampled_from(CONTINUATIONS),
    ),
    max_size=8,
).map("\n".join)


@settings(max_examples=800, deadline=None)
@given(frontmatters)
def test_frontmatter_loader_agrees_with_pure_python_safe_load(source: str) -> None:
    """libyaml's CSafeLoader (when present) reads exactly what yaml.safe_load reads."""
    try:
        expected: Any = yaml.safe_load(source)
    except yaml.YAMLError as exc:
        with pytest.raises(yaml.YAMLError) as raised:
            load_yaml(source)
        assert (raised.value.problem, str(raised.value.problem_mark)) == (  # type: ignore[attr-defined]
            exc.problem,  # type: ignore[attr-defined]
            str(exc.problem_mark),  # type: ignore[attr-defined]
        )
        return
    except ValueError:  # a bad date in some value: the constructors are the same Python code
        with pytest.raises(ValueError):
            load_yaml(source)
        return
    assert load_yaml(source) == expected
    simple = _simple_mapping(source + "\n")
    if simple is not None:  # read without the parser: exactly what the loader builds
        assert simple == expected and list(simple) == list(expected)
        assert [type(v) for v in simple.values()] == [type(v) for v in expected.values()]


# --------------------------------------------------------------------------------------------
# Optional tier: the real vaults
# --------------------------------------------------------------------------------------------

CORPUS_FILES = sorted(CORPORA.rglob("*.md")) if CORPORA.is_dir() else []


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpora is not present")
def test_corpus_notes_extract_and_all_paths_agree_with_the_reference() -> None:
    mismatches = []
    for path in CORPUS_FILES:
        text = path.read_bytes().decode("utf-8", errors="replace")
        facts = extract_note(text)
        assert isinstance(facts, NoteFacts)
        if "[[" not in text:
            assert not facts.concepts
            continue
        parsed = parsed_links(text)
        if find_links(text) != parsed:
            mismatches.append(f"{path}: find_links disagrees with the markdown path")
        start = body_offset(text)
        if fast_path_ok(text, start) and find_links_fast(text, start) != parsed:
            mismatches.append(f"{path}: fast path disagrees")
        if implementation_links(text) != reference_links(text):
            mismatches.append(f"{path}: differs from the full markdown-it reference")
    assert not mismatches, "\n".join(mismatches[:20])


def test_created_as_epoch_milliseconds_is_read_like_dendron_writes_it() -> None:
    from contextgraph.notes.wikilinks import extract_note as _extract

    facts = _extract("---\ncreated: 1595952505017\n---\n[[a]]\n")
    assert (
        facts.created is not None
        and facts.created.isoformat() == "2020-07-28T16:08:25.017000+00:00"
    )
    assert facts.warnings == ()
    seconds = _extract("---\ncreated: 1595952505\n---\n")
    assert seconds.created is not None and seconds.created.year == 2020


def test_a_long_line_of_inline_html_is_looked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only a line's first `<` can start an HTML block; a line of a hundred thousand inline tags
    # must not be checked tag by tag (each check scans back to the line's start: quadratic).
    from contextgraph.notes import markdown

    checked: list[tuple[int, int]] = []

    class Counting:
        def fullmatch(self, src: str, pos: int, endpos: int) -> re.Match[str] | None:
            checked.append((pos, endpos))
            return PATTERN.fullmatch(src, pos, endpos)

    PATTERN = markdown._BEFORE_HTML_RE
    monkeypatch.setattr(markdown, "_BEFORE_HTML_RE", Counting())
    text = "x " + "a<b " * 100_000 + "\n\n<div>\n\n[[link]] `code`\n"
    links = find_links_markdown(text, 0)
    assert [link.concept for link in links] == ["link"]
    assert len(checked) == 2  # the long line's first `<`, and the `<div>` line


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 8)), max_size=12),
    st.integers(0, 70),
    st.integers(1, 12),
)
def test_ranges_meeting_a_stretch_agree_with_checking_each(
    spans: list[tuple[int, int]], start: int, length: int
) -> None:
    # links_in_inline finds the code spans and comments a link meets by bisection (a long
    # paragraph of links and code spans was quadratic); overlapping ranges are checked one by one.
    from contextgraph.notes.markdown import _Ranges

    ranges = [(a, a + n) for a, n in spans]
    end = start + length
    expected = sorted(r for r in ranges if r[0] < end and r[1] > start)
    assert sorted(_Ranges(ranges).meeting(start, end)) == expected
    disjoint, last = [], 0
    for a, n in sorted(spans):
        if a >= last:
            disjoint.append((a, a + n))
            last = a + n
    expected = [r for r in disjoint if r[0] < end and r[1] > start]
    assert _Ranges(disjoint).meeting(start, end) == expected


def test_links_of_a_long_paragraph_line_with_trailing_blanks_keep_their_offsets() -> None:
    """Each line's shift (its indentation, after trailing blanks are cut) is computed once, not
    once per link: a 2 MB line of 200,000 links took about two minutes when each link copied
    the line."""
    pieces = ["\U0001f600 ", "  > - ", "x "]  # an astral character, containers, plain text
    for lead in pieces:
        text = lead + "[[a]] `c` " * 500 + " \t\n  [[b]] `d`  \n"
        links = find_links_markdown(text, 0)
        assert [text[link.start : link.end] for link in links] == ["[[a]]"] * 500 + ["[[b]]"]


COMMENT_PIECES = ["<!--", "<!-- ", "-->", "--->", "-", "--", ">", "<", "!", "[[x]]", "a", " ", "\n"]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(COMMENT_PIECES), max_size=40))
def test_html_comments_agree_with_the_reference(pieces: list[str]) -> None:
    """Our refusal of a ``<!--`` that markdown-it's comment pattern cannot match
    (``markdown._comment_end``) reads comments exactly as markdown-it does."""
    text = "[[a]] `c` " + "".join(pieces)
    assert implementation_links(text) == reference_links(text)
    implementations_agree(text)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="-> a<!\n", max_size=40), st.integers(min_value=0, max_value=44))
def test_comment_end_is_markdown_its_comment_pattern(body: str, other: int) -> None:
    src = "<!--" + body
    assert _SHORT_COMMENT == "<!---?>"
    match = _COMMENT_RE.match(src)
    walks: dict[int, int] = {}
    _comment_end(src, min(other, len(src)), walks)  # answers from another start are shared
    assert _comment_end(src, 4, walks) == (match.end() if match else -1)


def test_many_comments_closed_by_three_dashes_cost_one_run() -> None:
    """``<!-- a --->`` is no comment to markdown-it's pattern, which ran from every ``<!--`` to
    the end of the paragraph (16,000 of them: 29 s); the runs now share their steps. (The
    reference, stock markdown-it, still pays for every run: 2,000 here.)"""
    text = "x [[a]] " + "<!-- a --->" * 2_000 + "\n\n[[b]] <!-- [[c]] -->"
    assert (
        implementation_links(text)
        == reference_links(text)
        == Counter({(False, "a"): 1, (False, "b"): 1})
    )
