"""Helpers shared by the language front-ends."""

from __future__ import annotations

from contextgraph.codegraph.model import CodeParseError

#: A text with more U+FFFD (bytes that did not decode) than this share of its characters, and
#: at least ``_MIN_REPLACEMENTS`` of them, is taken for binary content.
_REPLACEMENT_SHARE = 0.10
_MIN_REPLACEMENTS = 4


def check_text(text: str) -> None:
    """Reject binary content (NUL bytes, or many undecodable bytes) before parsing."""
    if "\x00" in text:
        raise CodeParseError("binary content: the text contains NUL bytes")
    bad = text.count("\ufffd")
    if bad >= _MIN_REPLACEMENTS and bad > _REPLACEMENT_SHARE * len(text):
        raise CodeParseError(f"binary content: {bad} undecodable bytes")

