"""Turn arbitrary user input into a safe SQLite FTS5 ``MATCH`` expression.

The FTS5 query language gives meaning to ``"``, ``*``, ``^``, ``:``, ``(``, ``)``, ``+``,
``-``, ``{``, ``}`` and the keywords ``AND``/``OR``/``NOT``/``NEAR``; a raw user query passed to
``MATCH`` therefore raises ``sqlite3.OperationalError`` for inputs as ordinary as ``c++`` or
``foo:bar``. :func:`build_match` rewrites the input so that every term FTS5 sees is a
double-quoted string, which FTS5 only ever tokenizes (never interprets as syntax):

* ``"quoted phrases"`` in the input stay phrases (an unclosed quote runs to the end);
* everything else is cut into *bare words* at whitespace and at the grouping punctuation
  ``( ) [ ] { } , ;``; a bare word made of several tokens (``foo-bar``, ``col:foo``,
  ``e.g``) becomes one phrase (``"foo bar"``) so the tokens must still be adjacent;
* a *token* is a maximal run of characters that the ``unicode61`` tokenizer treats as token
  characters; tokens are copied verbatim (FTS5 does the case and diacritic folding), all
  other characters act as separators, so operator characters never reach FTS5;
* a bare word is also asked for in its other spellings (``create_time`` as ``createtime``,
  ``TokenValidator`` as ``token validator``), which ``contextgraph.graph.searchterms`` indexes,
  and, unless every word is required, by its parts (``create``, ``time``) too;
* terms are joined by ``OR`` (any word; bm25 ranks more and rarer words first) or, for
  ``all_words``, by ``AND``; duplicate terms are dropped, and English stopwords too while
  other words remain;
* a phrase or bare word of more than :data:`MAX_PHRASE_TOKENS` tokens is read as its
  consecutive pieces of that many (tokens stay adjacent within a piece). FTS5 checks a phrase
  token by token in every file that holds all its tokens, so a 4,000-character ``md_md_md…``
  (1,333 tokens, in every note) cost a search seconds; its pieces are all alike, one term, and
  cost milliseconds. The pieces of a bare word are terms of their own; those of a quoted
  phrase are one term that needs them all (``("p1" AND "p2")``): a file must hold every piece;
* NUL and lone surrogates are removed before anything else (SQLite cannot take the latter).

The token-character test is exact for the index's ``unicode61`` (:data:`TOKENIZER`: with
``remove_diacritics 2``, and combining marks counted as parts of words): ``unicode61``
classifies characters with its own frozen Unicode 6.1 tables, which differ from Python's
:mod:`unicodedata` (code points unassigned in Unicode 6.1 -- e.g. newer emoji -- are token
characters, and so on). ``_SEPARATOR_RANGES`` below lists every code point that
``unicode61`` treats as a separator; ``scripts/fts_separators.py`` generates it by tokenizing
``"a" + chr(cp) + "b"`` for every code point with SQLite's own tokenizer, and
``tests/test_ftsquery.py`` checks it against the running SQLite.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator
from dataclasses import dataclass

from contextgraph.graph.searchterms import camel_parts
from contextgraph.graph.stopwords import STOPWORDS

__all__ = [
    "MAX_PHRASE_TOKENS",
    "TOKENIZER",
    "Term",
    "build_match",
    "is_token_char",
    "query_terms",
    "tokenize",
]

# The tokenizer's unicode61 part, as the index uses it (migration 0008_fts_marks): combining
# marks (M*) are parts of words, as letters, numbers and private-use characters are.
TOKENIZER = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
# Hex code-point ranges ("A-B" inclusive, or a single "A") that TOKENIZER treats as separators
# (scripts/fts_separators.py prints them). Everything else is a token character. Surrogates are
# included but never reach the tokenizer.
_SEPARATOR_RANGES = (
    "0-2F 3A-40 5B-60 7B-A9 AB-B1 B4 B6-B8 BB BF D7 F7 2C2-2C5 2D2-2DF 2E5-2EB 2ED 2EF-2FF "
    "375 37E 384-385 387 3F6 482 55A-55F 589-58A 58F 5BE 5C0 5C3 5C6 5F3-5F4 600-604 "
    "606-60F 61B 61E-61F 66A-66D 6D4 6DD-6DE 6E9 6FD-6FE 700-70D 70F 7F6-7F9 830-83E 85E "
    "964-965 970 9F2-9F3 9FA-9FB AF0-AF1 B70 BF3-BFA C7F D79 DF4 E3F E4F E5A-E5B F01-F17 "
    "F1A-F1F F34 F36 F38 F3A-F3D F85 FBE-FC5 FC7-FCC FCE-FDA 104A-104F 109E-109F 10FB "
    "1360-1368 1390-1399 1400 166D-166E 1680 169B-169C 16EB-16ED 1735-1736 17D4-17D6 "
    "17D8-17DB 1800-180A 180E 1940 1944-1945 19DE-19FF 1A1E-1A1F 1AA0-1AA6 1AA8-1AAD "
    "1B5A-1B6A 1B74-1B7C 1BFC-1BFF 1C3B-1C3F 1C7E-1C7F 1CC0-1CC7 1CD3 1FBD 1FBF-1FC1 "
    "1FCD-1FCF 1FDD-1FDF 1FED-1FEF 1FFD-1FFE 2000-2064 206A-206F 207A-207E 208A-208E "
    "20A0-20B9 2100-2101 2103-2106 2108-2109 2114 2116-2118 211E-2123 2125 2127 2129 212E "
    "213A-213B 2140-2144 214A-214D 214F 2190-23F3 2400-2426 2440-244A 249C-24E9 2500-26FF "
    "2701-2775 2794-2B4C 2B50-2B59 2CE5-2CEA 2CF9-2CFC 2CFE-2CFF 2D70 2E00-2E2E 2E30-2E3B "
    "2E80-2E99 2E9B-2EF3 2F00-2FD5 2FF0-2FFB 3000-3004 3008-3020 3030 3036-3037 303D-303F "
    "309B-309C 30A0 30FB 3190-3191 3196-319F 31C0-31E3 3200-321E 322A-3247 3250 3260-327F "
    "328A-32B0 32C0-32FE 3300-33FF 4DC0-4DFF A490-A4C6 A4FE-A4FF A60D-A60F A673 A67E "
    "A6F2-A6F7 A700-A716 A720-A721 A789-A78A A828-A82B A836-A839 A874-A877 A8CE-A8CF "
    "A8F8-A8FA A92E-A92F A95F A9C1-A9CD A9DE-A9DF AA5C-AA5F AA77-AA79 AADE-AADF AAF0-AAF1 "
    "ABEB D800-DFFF FB29 FBB2-FBC1 FD3E-FD3F FDFC-FDFD FE10-FE19 FE30-FE52 FE54-FE66 "
    "FE68-FE6B FEFF FF01-FF0F FF1A-FF20 FF3B-FF40 FF5B-FF65 FFE0-FFE6 FFE8-FFEE FFF9-FFFF "
    "10100-10102 10137-1013F 10179-10189 10190-1019B 101D0-101FC 1039F 103D0 10857 1091F "
    "1093F 10A50-10A58 10A7F 10B39-10B3F 11047-1104D 110BB-110C1 11140-11143 111C5-111C8 "
    "12470-12473 1D000-1D0F5 1D100-1D126 1D129-1D164 1D16A-1D16C 1D173-1D17A 1D183-1D184 "
    "1D18C-1D1A9 1D1AE-1D1DD 1D200-1D241 1D245 1D300-1D356 1D6C1 1D6DB 1D6FB 1D715 1D735 "
    "1D74F 1D76F 1D789 1D7A9 1D7C3 1EEF0-1EEF1 1F000-1F02B 1F030-1F093 1F0A0-1F0AE "
    "1F0B1-1F0BE 1F0C1-1F0CF 1F0D1-1F0DF 1F110-1F12E 1F130-1F16B 1F170-1F19A 1F1E6-1F202 "
    "1F210-1F23A 1F240-1F248 1F250-1F251 1F300-1F320 1F330-1F335 1F337-1F37C 1F380-1F393 "
    "1F3A0-1F3C4 1F3C6-1F3CA 1F3E0-1F3F0 1F400-1F43E 1F440 1F442-1F4F7 1F4F9-1F4FC "
    "1F500-1F53D 1F540-1F543 1F550-1F567 1F5FB-1F640 1F645-1F64F 1F680-1F6C5 1F700-1F773 "
    "E0001 E0020-E007F "
)


def _parse_ranges(spec: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    starts: list[int] = []
    ends: list[int] = []
    for item in spec.split():
        low, _, high = item.partition("-")
        starts.append(int(low, 16))
        ends.append(int(high or low, 16))
    return tuple(starts), tuple(ends)


_SEP_STARTS, _SEP_ENDS = _parse_ranges("".join(_SEPARATOR_RANGES))

# Characters that end a bare word (besides whitespace): a query like ``NEAR(a b)`` or
# ``a,b`` is a list of words, not one hyphenated word.
_WORD_BREAKS = frozenset("()[]{},;")
# The most tokens one phrase of the MATCH holds (see the module's docstring). FTS5's cost of a
# phrase grows with its tokens, about 0.45 ms each over 12,400 notes that all hold them; longer
# identifiers and quotations than this are rare.
MAX_PHRASE_TOKENS = 16


def is_token_char(ch: str) -> bool:
    """True if FTS5's ``unicode61`` tokenizer treats the character ``ch`` as part of a token."""
    cp = ord(ch)
    i = bisect.bisect_right(_SEP_STARTS, cp) - 1
    return i < 0 or cp > _SEP_ENDS[i]


def _clean(text: str) -> str:
    """Remove NUL and lone surrogates (a str never holds a paired surrogate)."""
    return "".join(ch for ch in text if ch != "\x00" and not "\ud800" <= ch <= "\udfff")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into maximal runs of ``unicode61`` token characters (not case-folded)."""
    tokens: list[str] = []
    current: list[str] = []
    for ch in _clean(text):
        if is_token_char(ch):
            current.append(ch)
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return tokens


def _segments_with_kind(text: str) -> Iterator[tuple[str, bool]]:
    """Yield the quoted phrases and bare words of ``text`` in order, without their quotes.

    Each comes with ``True`` for a quoted phrase, ``False`` for a bare word.
    """
    pos = 0
    length = len(text)
    while pos < length:
        if text[pos] == '"':
            close = text.find('"', pos + 1)
            end = length if close < 0 else close
            yield text[pos + 1 : end], True
            pos = end + 1
            continue
        quote = text.find('"', pos)
        end = length if quote < 0 else quote
        word: list[str] = []
        for ch in text[pos:end]:
            if ch.isspace() or ch in _WORD_BREAKS:
                if word:
                    yield "".join(word), False
                    word = []
            else:
                word.append(ch)
        if word:
            yield "".join(word), False
        pos = end


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


@dataclass(frozen=True)
class Term:
    """One word or phrase of a query, with every spelling the index may hold it in.

    ``spellings`` are the word itself (the first) and its other spellings; ``parts`` are the
    pieces of a compound word (``create`` and ``time`` of ``create_time``, ``token`` and
    ``validator`` of ``TokenValidator``), which an any-words query also accepts, so a file
    that names only part of an identifier still ranks, below one that names all of it. A
    quoted phrase has one spelling, or, past :data:`MAX_PHRASE_TOKENS` tokens, its pieces,
    which the term needs all of.
    """

    text: str  # the tokens as typed, space-separated
    spellings: tuple[str, ...]  # FTS5 strings (unquoted), the first being ``text``
    phrase: bool  # typed inside double quotes
    parts: tuple[str, ...] = ()

    def expression(self, *, loose: bool = True) -> str:
        alternatives = self.spellings + (self.parts if loose else ())
        if len(alternatives) == 1:
            return _quote(alternatives[0])
        joiner = " AND " if self.phrase else " OR "  # a long phrase's pieces: all of them
        return "(" + joiner.join(_quote(s) for s in alternatives) + ")"


def _spellings(tokens: list[str]) -> tuple[str, ...]:
    """``create_time`` → create time | createtime; ``TokenValidator`` → … | token validator."""
    typed = " ".join(tokens)
    out = {typed.lower(): typed}
    if len(tokens) > 1:
        out.setdefault("".join(tokens).lower(), "".join(tokens))
    if all(t.isascii() for t in tokens):
        split = " ".join(p for t in tokens for p in camel_parts(t))
        out.setdefault(split, split)
    return tuple(out.values())


def _parts(tokens: list[str], spellings: tuple[str, ...]) -> tuple[str, ...]:
    """The single words inside a compound word, stopwords and spellings left out."""
    taken = {s.lower() for s in spellings}
    out: dict[str, str] = {}
    for token in tokens:
        pieces = camel_parts(token) if token.isascii() else [token.lower()]
        for piece in [token, *pieces] if len(pieces) > 1 else [token]:
            key = piece.lower()
            if key not in taken and key not in STOPWORDS:
                out.setdefault(key, piece)
    return tuple(out.values())


def query_terms(query: str) -> list[Term]:
    """The words and phrases of ``query``, each once; stopwords go when other words remain."""
    return list(_query_terms(query))


@functools.lru_cache(maxsize=1024)
def _query_terms(query: str) -> tuple[Term, ...]:
    """:func:`query_terms`, remembered: a search reads them twice (its match and its snippets),
    a retrieval more often, and the spellings cost as much as a short statement."""
    terms: list[Term] = []
    seen: set[str] = set()
    for segment, phrase in _segments_with_kind(_clean(query)):
        every = tokenize(segment)
        pieces = [every[i : i + MAX_PHRASE_TOKENS] for i in range(0, len(every), MAX_PHRASE_TOKENS)]
        if phrase:  # one term: the phrase, or past MAX_PHRASE_TOKENS its pieces, all needed
            typed = " ".join(every)
            if every and typed.lower() not in seen:
                seen.add(typed.lower())
                terms.append(Term(typed, tuple(dict.fromkeys(" ".join(p) for p in pieces)), True))
            continue
        for tokens in pieces:  # a bare word's pieces: each a term of its own
            typed = " ".join(tokens)
            if typed.lower() in seen:
                continue
            seen.add(typed.lower())
            spellings = _spellings(tokens)
            terms.append(Term(typed, spellings, False, _parts(tokens, spellings)))
    content = [t for t in terms if t.phrase or t.text.lower() not in STOPWORDS]
    return tuple(content or terms)


def build_match(query: str, *, all_words: bool = False) -> str | None:
    """Build an FTS5 ``MATCH`` expression for the user input ``query``.

    Plain words match *any* of them (``OR``; bm25 ranks files holding more and rarer words
    first), or every one of them with ``all_words``. Returns ``None`` when ``query`` holds no
    searchable token (empty, whitespace or punctuation only), so callers can skip the search
    instead of sending FTS5 an expression it rejects. Examples::

        build_match("hello world")             == '"hello" OR "world"'
        build_match('"machine learning" ai')   == '"machine learning" OR "ai"'
        build_match("the parser")              == '"parser"'
        build_match("c++ foo-bar", all_words=True) == '"c" AND ("foo bar" OR "foobar")'
    """
    terms = query_terms(query)
    if not terms:
        return None
    if all_words:
        return " AND ".join(t.expression(loose=False) for t in terms)
    return " OR ".join(t.expression() for t in terms)
