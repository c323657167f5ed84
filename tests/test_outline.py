"""The outline reader (notes/outline.py) finds what markdown-it's parse of the part finds."""

from __future__ import annotations

from unittest import mock

from helpers import first_links_agree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextgraph.notes import markdown
from contextgraph.notes.outline import outline_blocks
from tests.test_wikilinks import (
    concepts,
    implementation_links,
    implementations_agree,
    parsed_links,
    reference_links,
)


def parsed_without_outlines(text: str) -> list[tuple[int, int, bool]]:
    with mock.patch.object(markdown, "outline_blocks", return_value=None):
        return [(link.start, link.end, link.embed) for link in parsed_links(text)]


def agree(text: str) -> None:
    """Links, with offsets, agree with and without the outline reader, and with the
    independent reference (markdown-it's full block and inline parse of the whole note)."""
    links = implementations_agree(text)
    assert [(link.start, link.end, link.embed) for link in links] == parsed_without_outlines(text)
    assert implementation_links(text) == reference_links(text)
    first_links_agree(text)  # a note read only as far as a question needs


LOGSEQ = """\
- ## Beta 0.10.15 [[Dec 1st, 2025]]
  id:: 692d8283
  Download: <https://example.org/x>
\t- [[Fixed issues]]
\t\t- Fix: `[[not a link]]` in code, then [[Editor]]
\t\t  **NOTE**: a `code span
\t\t  across lines [[hidden]]` and [[shown]]
\t- #tag [[Enhancement]] _italic_ ~strike~
\t\t- 12 files, 1.5 times [[faster]]
- **Bold** item [[last]]
"""


def test_a_logseq_outline_is_read_without_markdown_it() -> None:
    body = markdown._Source(LOGSEQ, 0).src
    paragraphs = outline_blocks(body)
    assert paragraphs is not None
    assert [[first, first + len(texts)] for first, texts in paragraphs] == [
        [0, 1],
        [1, 3],  # a heading leaves no paragraph open: the text after it starts one
        [3, 4],
        [4, 7],
        [7, 8],
        [8, 9],
        [9, 10],
    ]
    agree(LOGSEQ)
    assert concepts(LOGSEQ) == {
        "dec-1st,-2025": 1,
        "fixed-issues": 1,
        "editor": 1,
        "shown": 1,
        "enhancement": 1,
        "faster": 1,
        "last": 1,
    }


def test_lines_that_may_open_a_block_are_left_to_markdown_it() -> None:
    for line in [
        "\t-",  # an empty item cannot interrupt a paragraph: it may be a setext underline
        "\t- 1. nested ordered list",
        "\t\t  ```",
        "\t- <div>",
        "  > quote",
        "\t- ---",
        "  ***",
        "  ===",
        "\t-\ttab after the bullet",
        "\t-  two spaces after the bullet",
    ]:
        assert outline_blocks(f"- [[a]] `b`\n{line}\n") is None, line
        agree(f"- [[a]] `b`\n{line} [[c]]\n")


def test_a_thematic_break_that_looks_like_an_item_is_left_to_markdown_it() -> None:
    # "* **" is a thematic break, not an item holding "**": it ends the list, and the line
    # after it, indented a tab with no paragraph open, is indented code.
    for rule in ["* **", "- - -", "* * *", "-  --"]:
        text = f"- [[a]] x\n{rule}\n\t- [[b]]\n"
        assert outline_blocks(text) is None, rule
        agree(text)
        assert concepts(text) == {"a": 1}, rule


def test_indented_code_after_a_heading_is_left_to_markdown_it() -> None:
    # Four columns past the item's content, with no paragraph open, is indented code.
    assert outline_blocks("- # H\n      [[code]] `x`\n") is None
    agree("- # H\n      [[code]] `x`\n")
    assert concepts("- # H\n      [[code]] `x`\n") == {}
    # After a paragraph the same line is text of it.
    assert outline_blocks("- p\n      [[text]] `x`\n") is not None
    assert concepts("- p\n      [[text]] `x`\n") == {"text": 1}


INDENTS = ["", "", "\t", "\t\t", "\t\t\t", " ", "  ", "   ", "    ", "      ", "\t  ", "  \t"]
BULLETS = ["- ", "- ", "* ", "+ ", "-", ""]
STARTS = ["", "", "# ", "## ", "#tag ", "####### ", "**b** ", "__u__ ", "_", "*", "`", "``",
          "```", "~~~", "~", "1. ", "1) ", "12 ", "<span> ", ">", "=", "==", "---", "***", "- ",
          "[x] ", "text "]  # fmt: skip
PIECES = ["[[a]]", "[[b|c]]", "![[d]]", "`", "``", "text ", "<!-- ", "-->", "*", " ", "\t", "#"]

SAFE_BULLETS = ["- ", "- ", "* ", "+ ", ""]
SAFE_STARTS = ["", "", "", "# ", "## ", "#tag ", "**b** ", "_i_ ", "`", "``", "~", "12 ", "[x] "]


def outlines(
    bullets: list[str], starts: list[str], end: str = "", *, blank: bool = False
) -> st.SearchStrategy[str]:
    """Notes of an item, then lines of an indentation, a bullet, a start and pieces; with
    ``blank``, blank lines among them."""
    line = st.builds(
        lambda indent, bullet, start, pieces: indent + bullet + start + "".join(pieces) + end,
        st.sampled_from(INDENTS),
        st.sampled_from(bullets),
        st.sampled_from(starts),
        st.lists(st.sampled_from(PIECES), max_size=5),
    )
    if blank:
        line = st.one_of(line, st.sampled_from(["", "", "  ", "\t"]))
    lines = st.lists(line, min_size=1, max_size=25)
    return lines.map(lambda lines: "- [[a]] x\n" + "\n".join(lines) + "\n")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        outlines(BULLETS, STARTS),
        outlines(SAFE_BULLETS, SAFE_STARTS, "x"),  # most of these are read as outlines
        outlines(SAFE_BULLETS, SAFE_STARTS, "x", blank=True),
    )
)
def test_outlines_agree_with_markdown_it(text: str) -> None:
    agree(text)


def test_a_blank_line_ends_the_paragraph_but_not_the_items() -> None:
    # The code span cannot cross the blank line: [[b]] is a link, in the item's second
    # paragraph; the line after the next blank line, indented under the nested item, is in it.
    text = "- [[a]] `y\n\n  [[b]] z`\n\t- c\n\n\t  [[d]] `e`\n"
    assert outline_blocks(text) is not None
    agree(text)
    assert concepts(text) == {"a": 1, "b": 1, "d": 1}
    # Past the item's content by four columns after a blank line: indented code.
    code = "- [[a]] x\n\n      [[b]] `y`\n"
    assert outline_blocks(code) is None
    agree(code)
    assert concepts(code) == {"a": 1}


def test_an_item_short_of_the_innermost_item_ends_the_paragraph() -> None:
    # The tab puts the last item four columns past the outer items it reaches, but short of
    # the nested item's content: markdown-it ends the paragraph there and reads indented code
    # (a lazy continuation, as CommonMark's reference reads it, would hold a second link).
    text = "- [[a]] x\n - x\n  - x\n   - x\n      - x\n\t- [[a]]x\n"
    agree(text)
    assert concepts(text) == {"a": 1}
    heading = "- [[a]] x\n - x\n  - x\n   - x\n      - x\n\t## [[b]]\n"
    agree(heading)
    assert concepts(heading) == {"a": 1}
