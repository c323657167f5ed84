"""Make a vault of long real notes: each note of the output joins two notes of the input.

Stand-in for a vault whose notes are about twice as long as those of the corpora (issue 14's
held-out vault: 13,415 notes whose read+hash+regex floor is about twice ours per note). The
notes of ``SOURCE`` (``*.md``, hidden folders left out, in sorted order) are cycled through
until ``--notes`` are written, the k-th copy into ``OUT/copyK/`` under its own relative path;
each is its own text, a blank line, and the text of another note (chosen by a fixed stride, so
every run writes the same bytes). Wikilinks, code, frontmatter and all stay as written: the
second note's frontmatter becomes body text. Prints one JSON object: what it wrote.

    python scripts/long_vault.py ../shared/corpora /tmp/long-vault --notes 13415
    python scripts/bench.py --vault /tmp/long-vault
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def notes_of(source: Path) -> list[Path]:
    """The markdown notes under ``source``, hidden folders left out, in a stable order."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(source):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found.extend(Path(folder, name) for name in sorted(files) if name.endswith(".md"))
    return found


def make(source: Path, out: Path, count: int) -> int:
    """Write ``count`` joined notes under ``out``; return how many source notes were read."""
    notes = notes_of(source)
    if not notes:
        raise SystemExit(f"no markdown notes under {source}")
    texts = [note.read_bytes() for note in notes]
    for i in range(count):
        copy, j = divmod(i, len(notes))
        other = (j * 7 + 1 + copy) % len(notes)
        target = out / f"copy{copy}" / notes[j].relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(texts[j] + b"\n\n" + texts[other])
    return len(notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a folder of markdown notes")
    parser.add_argument("out", type=Path, help="where to write the vault (must not exist)")
    parser.add_argument("--notes", type=int, default=13_415, help="notes to write")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: give a new folder")
    read = make(args.source, args.out, args.notes)
    print(json.dumps({"notes": args.notes, "source_notes": read, "out": str(args.out)}))


if __name__ == "__main__":
    main()
