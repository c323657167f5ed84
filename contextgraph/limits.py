"""Every bound on a caller's argument, defined once.

The library checks them (:meth:`Bound.check`), the CLI turns them into ``click.IntRange``
and the MCP server into ``Field(ge=…, le=…)``, so the three can never disagree. A bound
names the argument as the library spells it; each door words its own flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextgraph.errors import InvalidArgument

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str never holds a paired surrogate


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot encode, nor SQLite bind) made one
    U+FFFD. Encoding with ``surrogatepass`` and decoding with ``replace`` would give three."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def join_surrogates(text: str) -> str:
    """``text`` with each pair of surrogates joined into the character it encodes, and each
    lone one made U+FFFD: YAML's ``"\\uD83C\\uDF89"`` (how JSON-minded writers spell an emoji)
    parses to two surrogates, which neither UTF-8 nor SQLite takes."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return replace_lone_surrogates(joined)


@dataclass(frozen=True)
class Bound:
    """An inclusive integer range for one argument."""

    name: str
    low: int
    high: int

    def check(self, value: int) -> int:
        """Return ``value``, or raise :class:`InvalidArgument` when it is out of range."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{self.name} must be a whole number, not {value!r}")
        if not self.low <= value <= self.high:
            raise InvalidArgument(
                f"{self.name} must be between {self.low} and {self.high}, not {value}"
            )
        return value


@dataclass(frozen=True)
class Length:
    """The most characters one text argument may hold."""

    name: str
    high: int

    def check(self, value: str) -> str:
        """Return ``value``, or raise :class:`InvalidArgument` when it is too long."""
        if len(value) > self.high:
            raise InvalidArgument(
                f"{self.name} is {len(value)} characters long; at most {self.high} are taken"
            )
        return value


# The longest concept name (SPEC §2): longer names are dropped; the setting
# ``max_concept_length`` may lower it.
MAX_CONCEPT_LENGTH = 200

# BuildContext (SPEC §5). Depth 0 and 1 give direct relations only.
CONTEXT_DEPTH = Bound("depth", 0, 5)
CONTEXT_MAX_ENTITIES = Bound("max_entities", 1, 100)
# Expansion (SPEC §8).
EXPAND_MAX_DEPTH = Bound("max_depth", 1, 5)
EXPAND_MAX_NODES = Bound("max_nodes", 1, 500)
EXPAND_MAX_SEEDS = 100
EXPAND_DIRECTIONS = ("both", "out", "in")  # both ways, what the seeds use, what uses them
# Sync: the folders one call may name (a new one becomes a source).
SYNC_MAX_PATHS = 100
# Search (SPEC §9). The page bound keeps the row offset well inside SQLite's 64-bit integers.
SEARCH_LIMIT = Bound("limit", 1, 100)
SEARCH_PAGE = Bound("page", 1, 1_000_000)
# Visualize (SPEC §9).
VISUALIZE_DEPTH = Bound("depth", 1, 5)
VISUALIZE_MAX_NODES = Bound("max_nodes", 5, 100)
# Retrieve (SPEC §13).
RETRIEVE_K = Bound("k", 1, 50)
RETRIEVE_BUDGET_TOKENS = Bound("budget_tokens", 100, 100_000)
# Free text a caller types: a search query or a retrieval question.
MAX_QUERY_CHARS = 4000
# Writing (SPEC §14): how many occurrences a replace_text edit may expect.
EDIT_COUNT = Bound("count", 1, 10_000)
# A title or path given to write_note / move_note.
MAX_PATH_CHARS = 4096
# A name a caller types: a concept (BuildContext, visualize) or an expansion seed (a symbol, a
# file path, a concept). Concepts are at most 200 characters once normalised.
NAME = Length("the name", 1000)
# A source's name, the first part of its memory:// URIs.
SOURCE_NAME = Length("the source name", 200)
# Editing (SPEC §14): the text replace_text finds, the heading replace_section replaces, the
# hash a caller read (expected_hash), and a note's text as a caller writes it.
EDIT_FIND = Length("the text to find", 100_000)
EDIT_HEADING = Length("the heading", 1000)
EXPECTED_HASH = Length("the expected hash", 128)
NOTE_TEXT = Length("the note's text", 10 * 1024 * 1024)
