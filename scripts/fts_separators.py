#!/usr/bin/env python3
"""Print the code points FTS5's ``unicode61`` tokenizer treats as separators, as the ranges of
``contextgraph.graph.ftsquery._SEPARATOR_RANGES``: run it when the index's tokenizer changes.

    python scripts/fts_separators.py

It tokenizes ``"a" + chr(cp) + "b"`` for every code point with the running SQLite (one token:
``cp`` is a token character; two: a separator). Surrogates and NUL are listed as separators:
they never reach the tokenizer. tests/test_ftsquery.py checks the shipped table against SQLite.
"""

from __future__ import annotations

import sqlite3

from contextgraph.graph.ftsquery import TOKENIZER

WIDTH = 86  # characters of ranges per line of the table


def separators(tokenize: str) -> list[tuple[int, int]]:
    """The inclusive ranges of code points that split a word under ``tokenize``."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize={tokenize!r})")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    points = [cp for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    conn.executemany(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", [(cp, f"a{chr(cp)}b") for cp in points]
    )
    tokens = dict(conn.execute("SELECT doc, count(*) FROM v GROUP BY doc"))
    split = sorted({0, *range(0xD800, 0xE000), *(cp for cp in points if tokens.get(cp) != 1)})
    ranges: list[tuple[int, int]] = []
    for cp in split:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def main() -> None:
    items = [f"{a:X}" if a == b else f"{a:X}-{b:X}" for a, b in separators(TOKENIZER)]
    line = ""
    for item in items:
        if len(line) + len(item) + 1 > WIDTH:
            print(f'    "{line}"')
            line = ""
        line += item + " "
    print(f'    "{line}"')


if __name__ == "__main__":
    main()
