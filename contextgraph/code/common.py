"""Helpers shared by the language front-ends."""

from __future__ import annotations

from contextgraph.code.model import CodeParseError

#: A text with more U+FFFD (bytes that did not decode) than this share of its characters, and
#: at least ``_MIN_REPLACEMENTS`` of them, is taken for binary content.
_REPLACEMENT_SHARE = 0.10
_MIN_REPLACEMENTS = 4


def check_nul(text: str) -> None:
    if "\x00" in text:
        raise CodeParseError("binary content: the text contains NUL bytes")


def undecodable(text: str) -> str | None:
    """The reason to take ``text`` for binary content decoded with replacement, if it is."""
    bad = text.count("\ufffd")
    if bad >= _MIN_REPLACEMENTS and bad > _REPLACEMENT_SHARE * len(text):
        return f"binary content: {bad} undecodable bytes"
    return None


def check_text(text: str) -> None:
    """Reject binary content (NUL bytes, or many undecodable bytes) before parsing."""
    check_nul(text)
    reason = undecodable(text)
    if reason:
        raise CodeParseError(reason)


class SymbolAcc:
    """What is collected about one symbol while a file is walked: kind, line, bases, references."""

    __slots__ = ("bases", "kind", "line", "refs")

    def __init__(self, kind: str, line: int) -> None:
        self.kind = kind
        self.line = line
        self.bases: list[str] = []
        self.refs: set[str] = set()
