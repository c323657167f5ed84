"""Sentence-aware content previews (placeholder, being written)."""

from __future__ import annotations


def content_preview(
    text: str, related: str, query: str, *, limit: int = 200, hard_limit: int = 240
) -> str:
    """Return an excerpt of the note."""
    return text[:limit]
