"""Tests for contextgraph.notes.preview.content_preview."""

from __future__ import annotations

import pytest
from helpers import whole_note_preview
from hypothesis import given, settings
from hypothesis import strategies as st

from contextgraph.notes.preview import content_preview

NOTE = (
    "---\ntitle: Note\ncreated: 2021-01-01\n---\n"
    "# Title\n\n"
    "Intro sentence about [[Q]]. Here [[R]] is explained in detail! The end?\n"
)


def test_prefers_related_concept_sentence() -> None:
    assert content_preview(NOTE, "r", "q") == "Here [[R]] is explained in detail!"


def test_falls_back_to_query_sentence() -> None:
    assert content_preview(NOTE, "unrelated", "q") == "Intro sentence about [[Q]]."


def test_falls_back_to_body_start() -> None:
    preview = content_preview(NOTE, "x", "y")
    assert preview.startswith("Intro sentence about [[Q]].")
    assert "Title" not in preview and "created" not in preview  # no heading, no frontmatter
    assert len(preview) <= 200


def test_body_start_is_cut_at_a_sentence_boundary_when_possible() -> None:
    text = "First sentence here. " + "Second one is much longer than the first one. " * 6
    preview = content_preview(text, "x", "y", limit=80)
    assert preview == "First sentence here. Second one is much longer than the first one."


def test_concepts_are_matched_after_normalisation() -> None:
    text = "One. Two with [[Machine Learning|ML]] inside. Three."
    assert (
        content_preview(text, "machine-learning", "q") == "Two with [[Machine Learning|ML]] inside."
    )


def test_does_not_split_inside_links() -> None:
    text = "Start. We use [[node.js]] and [[Vue.js|vue. js]] here. End."
    assert content_preview(text, "vue.js", "q") == "We use [[node.js]] and [[Vue.js|vue. js]] here."


def test_sentences_end_at_block_boundaries() -> None:
    text = "# Heading [[R]]\nParagraph line one\ncontinues [[Q]] here\n- item [[S]]\n> quote [[T]]"
    assert content_preview(text, "r", "q") == "Heading [[R]]"
    assert content_preview(text, "x", "q") == "Paragraph line one continues [[Q]] here"
    assert content_preview(text, "s", "q") == "item [[S]]"
    assert content_preview(text, "t", "q") == "quote [[T]]"


def test_quote_lines_stay_together_and_setext_headings_are_headings() -> None:
    text = "Title [[T]]\n=====\n\nBody.\n\n> quote line one\n> line two [[Q]] ends.\n\n---\n"
    assert content_preview(text, "q", "x") == "quote line one line two [[Q]] ends."
    assert content_preview(text, "t", "x") == "Title [[T]]"
    assert content_preview(text, "x", "y") == "Body. quote line one line two [[Q]] ends."


def test_markers_are_stripped_and_whitespace_collapsed() -> None:
    text = "1.   A   numbered\titem   with [[R]]   in it.\n\n  *  bullet [[Q]]\n"
    assert content_preview(text, "r", "q") == "A numbered item with [[R]] in it."
    assert content_preview(text, "x", "q") == "bullet [[Q]]"


def test_word_boundary_cut_with_ellipsis() -> None:
    text = "The [[R]] sentence " + "goes on and on " * 30 + "until it ends."
    preview = content_preview(text, "r", "q")
    assert preview.endswith("…")
    assert len(preview) <= 201
    assert preview[:-1] == preview[:-1].rstrip()  # cut at a word boundary
    assert text.startswith(preview[:-1])
    assert text[len(preview) - 1] == " "


def test_a_single_huge_word_is_cut_hard() -> None:
    preview = content_preview("[[R]]" + "x" * 1000, "r", "q", limit=50)
    assert len(preview) == 51 and preview.endswith("…")


def test_links_inside_code_blocks_dont_count() -> None:
    text = (
        "Plain intro.\n\n```\nCode mentions [[R]].\n```\n\n"
        "Inline `[[R]]` code. <!-- [[R]] --> Comment.\n\n"
        "Query [[Q]] sentence. Real [[R]] sentence.\n"
    )
    assert content_preview(text, "r", "q") == "Real [[R]] sentence."
    assert content_preview("```\n[[R]]\n```\nText.", "r", "q") == "Text."


def test_empty_body_gives_empty_preview() -> None:
    for text in ("", "   \n\n", "---\ntitle: only frontmatter\n---\n", "```\ncode only\n```\n"):
        assert content_preview(text, "r", "q") == ""


def test_crlf_and_bom() -> None:
    text = "\ufeff---\r\ntitle: t\r\n---\r\nFirst.\r\nSecond [[R]] line.\r\n"
    assert content_preview(text, "r", "q") == "Second [[R]] line."
    assert content_preview(text, "x", "y") == "First. Second [[R]] line."


def test_limits_are_respected_for_small_values() -> None:
    assert content_preview("Some text here.", "x", "y", limit=0) == ""
    assert len(content_preview("Some text here.", "x", "y", limit=5, hard_limit=4)) <= 4


fragments = st.lists(
    st.sampled_from(
        [
            "[[R]]",
            "[[Q]]",
            "[[a very long link name that goes on|alias]]",
            "word",
            "x" * 50,
            " ",
            "  ",
            ". ",
            "! ",
            "? ",
            "\n",
            "\n\n",
            "# ",
            "- ",
            "> ",
            "1. ",
            "```\n",
            "`",
            "<!-- ",
            " -->",
            "\t",
            "…",
            "é",
        ]
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(fragments, st.integers(min_value=1, max_value=300))
def test_never_exceeds_hard_limit(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    for related, query in (("r", "q"), ("x", "q"), ("x", "y")):
        preview = content_preview(text, related, query, limit=limit, hard_limit=limit + 40)
        assert len(preview) <= limit + 1
        assert preview == preview.strip()
        assert "  " not in preview and "\n" not in preview
        assert len(content_preview(text, related, query)) <= 240


def test_read_notes_are_kept_by_hash_least_recent_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import OrderedDict

    from contextgraph.notes import preview

    monkeypatch.setattr(preview, "_READ", OrderedDict())
    monkeypatch.setattr(preview, "_read_chars", 0)
    monkeypatch.setattr(preview, "_READ_MAX_NOTES", 2)
    monkeypatch.setattr(preview, "_READ_MAX_CHARS", 30)
    a = preview.note_of("ha", "[[A]] one.")
    assert preview.note_of("ha", "[[A]] one.") is a
    b = preview.note_of("hb", "[[B]] two.")
    assert preview.note_of("ha", "ignored: the hash names the text") is a  # a is the newest now
    c = preview.note_of("hc", "[[C]] three.")  # two notes at most: b, the oldest, goes
    assert list(preview._READ) == ["ha", "hc"] and preview._read_chars == 22
    assert preview.note_of("hb", "[[B]] two.") is not b
    long = preview.note_of("hl", "x" * 40)  # over the character bound alone: kept by nobody
    assert list(preview._READ) == [] and preview._read_chars == 0
    assert long.text == "x" * 40 and c.first_link("c") == 0


notes = st.lists(
    st.sampled_from(
        [
            "[[r]]", "[[q]]", "![[r]]", "[[R|shown]]", "Some words", ". ", "! ", "\n", "\n\n",
            "# ", "- ", "> ", "    ", "```\n", "``` a`b\n", "~~~\n", "`", "<!-- ", " -->",
            "<div>", "[x]: /u\n", "[x]", "\r\n",
        ]
    ),
    max_size=60,
).map("".join)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(notes)
def test_previews_read_as_far_as_needed_agree_with_the_whole_note(text: str) -> None:
    for related, query in (("r", "q"), ("q", "r"), ("x", "q"), ("x", "y")):
        assert content_preview(text, related, query) == whole_note_preview(text, related, query)


def test_a_first_link_the_blocks_leave_out_gives_way_to_a_later_one() -> None:
    from contextgraph.notes.preview import Note
    from contextgraph.notes.wikilinks import find_links

    # "``` a`b" opens no fence for markdown-it (a backtick in the info string), but the
    # blocks of a preview take it for one: the first [[r]] is on a line they leave out.
    text = (
        "``` a`b\n[[q]][[r]]- > ~~~\n\n```\n``` a`b\n. \n```\n"
        "Some words`<!-- [[r]]\nSome words```\n\n```\n- ```\n"
    )
    first, *later = [link.start for link in find_links(text) if link.concept == "r"]
    note = Note(text)
    assert note.sentence_at(first) is None and any(note.sentence_at(s) for s in later)
    assert content_preview(text, "r", "q") == whole_note_preview(text, "r", "q")
    assert "[[r]]" in content_preview(text, "r", "q")


def test_forget_notes_starts_the_kept_notes_afresh() -> None:
    from contextgraph.notes import preview

    kept = preview.note_of("h-forget", "[[A]] one.")
    assert preview.note_of("h-forget", "[[A]] one.") is kept
    preview.forget_notes()
    assert "h-forget" not in preview._READ and preview._read_chars == 0
    assert preview.note_of("h-forget", "[[A]] one.") is not kept
