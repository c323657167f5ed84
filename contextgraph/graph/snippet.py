"""Search snippets (SPEC §9): about ``SNIPPET_CHARS`` characters of a file around the query's
words, the words marked with ``**`` (:class:`Highlighter`)."""

from __future__ import annotations

from contextgraph.graph.ftsquery import Term
from contextgraph.graph.searchterms import body_start, camel_parts

SNIPPET_CHARS = 200


class Highlighter:
    """Cut a snippet around the query's words and mark them with ``**``.

    FTS5's own ``snippet()`` cannot skip a note's frontmatter and marks with brackets, which
    collide with WikiLinks; this reads the start of the stored text instead. The index stems
    words (Porter), so a query word marks every word that starts like it (``validate`` marks
    ``validation``), and both spellings of identifiers (``token`` marks ``TokenValidator``).
    Matches are found with ``str.find`` per stem (C speed), not a regex alternation.
    """

    MAX_PER_STEM = 64
    # Bounds on the work of one text, for long queries: the longest stems marked, and the
    # occurrences looked at, matching or not, of one stem and of all stems. Each stem is one
    # search of the whole text, and a stem met mostly inside words (``ng``, ``tion``) was
    # walked over every occurrence: a search for 1,000 word fragments (4,000 characters)
    # spent about 2 s cutting its 100 snippets. What lies past them goes unmarked.
    MAX_STEMS = 64
    MAX_LOOKS_PER_STEM = 8 * MAX_PER_STEM
    MAX_LOOKS = 4 * MAX_LOOKS_PER_STEM

    def __init__(self, terms: list[Term]) -> None:
        stems: set[str] = set()
        words: dict[str, set[str]] = {}  # stem -> the whole query words it was cut from
        for term in terms:
            for spelling in term.spellings + term.parts:
                for token in spelling.split():
                    for part in camel_parts(token):
                        stems.add(_stem(part))
                    words.setdefault(_stem(token), set()).add(token.lower())
        longest = sorted((s for s in stems if s), key=lambda s: (-len(s), s))
        self.stems = tuple(longest[: self.MAX_STEMS])
        self._words = {stem: sorted(w, key=len, reverse=True) for stem, w in words.items()}

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the query's words start a word of ``text`` (or a CamelCase part), in order."""
        lowered = text.lower()
        if len(lowered) != len(text):  # a few characters lower-case to two: keep offsets true
            lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
        found: dict[int, int] = {}
        looks = 0
        for stem in self.stems:
            pos = lowered.find(stem)
            count = 0
            last = min(looks + self.MAX_LOOKS_PER_STEM, self.MAX_LOOKS)
            while pos >= 0 and count < self.MAX_PER_STEM and looks < last:
                looks += 1
                if _starts_word(text, pos) and pos not in found:
                    found[pos] = self._end(text, lowered, stem, pos)
                    count += 1
                pos = lowered.find(stem, pos + 1)
        spans: list[tuple[int, int]] = []
        for start in sorted(found):
            if spans and start < spans[-1][1]:
                continue
            spans.append((start, found[start]))
        return spans

    def _end(self, text: str, lowered: str, stem: str, pos: int) -> int:
        """Where the word matched at ``pos`` ends: the whole query word where the text spells
        it (``postgresql`` marks all of ``PostgreSQL``), else the stem and the rest of its
        part: the lower-case letters and digits after it (``validate`` marks ``Validation``
        of ``ValidationError``), or the capitals of a word written in capitals."""
        for word in self._words.get(stem, ()):
            if lowered.startswith(word, pos):
                return pos + len(word)
        end = pos + len(stem)
        capitals = text[pos:end].isupper()
        while end < len(text) and (
            text[end].islower() or text[end].isdigit() or (capitals and text[end].isupper())
        ):
            end += 1
        return end

    def count(self, text: str) -> int:
        """How many of the query's words ``text`` holds (each word start counted once)."""
        return len(self.spans(text)) if self.stems else 0

    def snippet(self, text: str, *, note: bool) -> str:
        """About ``SNIPPET_CHARS`` characters of ``text`` around its first dense run of matches."""
        start = body_start(text) if note else 0
        body = text[start:]
        spans = self.spans(body) if self.stems else []
        if not spans:
            return _tidy(body[: SNIPPET_CHARS * 2], SNIPPET_CHARS)[0]
        # The window (starting at a match) that holds the most matches.
        best, best_count, j = 0, 0, 0
        for i, (s, _) in enumerate(spans):
            while j < len(spans) and spans[j][1] <= s + SNIPPET_CHARS:
                j += 1
            if j - i > best_count:
                best, best_count = i, j - i
        first = spans[best][0]
        lead = body.rfind("\n", max(0, first - 40), first)
        begin = lead + 1 if lead >= 0 else max(0, first - 40)
        while begin > 0 and begin < first and not body[begin - 1].isspace():
            begin += 1
        end = begin + SNIPPET_CHARS
        while end < len(body) and end < begin + SNIPPET_CHARS + 30 and not body[end].isspace():
            end += 1
        out: list[str] = ["…" if begin > 0 else ""]
        pos = begin
        for s, e in spans:
            if s < begin or e > end:
                continue
            out.append(body[pos:s])
            out.append("**" + body[s:e] + "**")
            pos = e
        out.append(body[pos:end])
        text_out = " ".join("".join(out).split())
        return text_out + ("…" if end < len(body) else "")


def _starts_word(text: str, pos: int) -> bool:
    """A word starts at ``pos``: after a non-alphanumeric, an underscore or a case change."""
    if pos == 0:
        return True
    before = text[pos - 1]
    if not before.isalnum():
        return True
    return before.islower() and text[pos].isupper()


def _stem(word: str) -> str:
    """A prefix the word's inflections share: ``tokens`` → ``toke``, ``validate`` → ``valid``,
    and, where an inflection's ending comes off, the stem the index matched: ``running`` →
    ``run``, ``boxes`` → ``box``, ``mapped`` → ``map`` (the cut of three letters alone left
    ``runn``, ``boxe``, ``mapp``, and the words the search had found went unmarked)."""
    word = word.lower()
    if len(word) <= 4:
        return word
    cut = word[: max(4, len(word) - 3)]
    base = _without_ending(word)
    return base if base is not None and len(base) < len(cut) else cut


def _without_ending(word: str) -> str | None:
    """``word`` without an inflection's ending, as Porter's first step takes it off."""
    for ending in ("ings", "ing", "edly", "ed"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            base = word[: -len(ending)]
            if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "aeioulsz":
                base = base[:-1]  # the doubled consonant of runn-ing, mapp-ed
            return base
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]  # boxes, classes, matches
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return None


def _tidy(text: str, limit: int) -> tuple[str, bool]:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat, False
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit] + "…", True


__all__ = ["SNIPPET_CHARS", "Highlighter"]
