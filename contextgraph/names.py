"""Concept-name normalisation (SPEC §2), apart from link extraction.

Kept out of :mod:`contextgraph.wikilinks` so that a query, which only normalises the name the user
typed, does not load the markdown parser and YAML (most of a CLI query's start-up otherwise).
"""

from __future__ import annotations

import re
import unicodedata

_SEPARATORS_RE = re.compile(r"[\s_/\\-]+")


def normalize(name: str) -> str:
    """Normalise a link target to its concept name ("" when nothing is left).

    The length limit is not applied here; see :func:`contextgraph.wikilinks.is_valid_concept`.
    """
    s = unicodedata.normalize("NFC", name).strip().lower()
    if not unicodedata.is_normalized("NFC", s):  # lower() may leave a non-NFC string
        s = unicodedata.normalize("NFC", s)
    return _SEPARATORS_RE.sub("-", s).strip("-")
