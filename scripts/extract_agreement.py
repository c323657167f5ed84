"""Compare note extraction of an older revision with the working tree, note by note.

Every ``*.md`` file under the given folders (default: ``../shared/corpora``), a bench vault of
``--bench-notes`` notes (``bench.generate_vault``) and ``--adversarial`` notes strung together
at random from the pieces that decide what is code, HTML, a container or a link (those of the
property tests in ``tests/test_wikilinks.py`` and more, with mixed line endings) are extracted
by the ``contextgraph`` package of revision ``--base`` (``git archive``) and by the one in this
working tree, each in a child process of its own. Compared per note: every link of
``find_links`` (start, end, target, concept, embed and the linked text itself), the
``NoteFacts`` of ``extract_note`` (concepts with counts in order, title, created, dropped,
warnings, body start) and ``parse_frontmatter``. CPU seconds of one cold ``extract_note`` pass
over every note are taken in interleaved runs (old, new, old, new, ...) and reported as
medians. Prints JSON:

``{"base", "runs", "sets": [{"name", "notes", "differ", "examples", "old_cpu_s", "new_cpu_s",
"old_runs", "new_runs"}]}``

    python scripts/extract_agreement.py [--base REV] [--runs N] [--bench-notes N]
        [--adversarial N] [FOLDER ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"


def _module(*names: str) -> Any:
    """Import the first of ``names`` that exists (the package layout moved between revisions)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
    raise ModuleNotFoundError(names[-1])


PIECES = [
    "```", "~~~", "``", "`", "\\`", "    ", "  ", " ", "\t", "> ", ">", "- ", "* ", "+ ",
    "1. ", "2) ", "# ", "## ", "***", "---", "===", "<!-- ", " -->", "-->", "<div>", "</div>",
    "<span>", "<x-y a='1'>", "<script>", "</script>", "<?php ", "?>", "<!X ", "<![CDATA[",
    "]]>", "[[x]]", "[[a|b]]", "[[a\\|b]]", "![[y.png]]", "[[Foo Bar]]", "[[z#h]]", "[[]]",
    "[[", "]]", "[", "]", "!", "|", "*", "_", "text", "word. ", "\n", "\n", "\n\n", "\n    ",
    "\n> ", "\n- ", "\n```\n", "[x]: url", '[x]: x.md "X"', "[x]:\n  url", "[x]",
    "<a\nhref='x'>", "<a title='`'>", "<http://x.y/`>", "<?p `?>", "(", ")", "&amp;", "\\[",
    "\\]", "[y](", "](`a`)", "[x][y]", "[y]", "\n\n[y]: /u\n", "\n\t- ", "\n\t\t- ",
    "\n- [[p]] ", "\n* * *\n", "\n<div>\n", "\n</div>\n", "\n<pre>\n", "\n</pre>\n",
    "\n\n    ", "[[A|`b`]]", "[[`c`]]", "\n1. ", "\n-\n", "\n---\n", "\n===\n", "\0",
]  # fmt: skip


def adversarial_notes(root: Path, count: int, seed: int = 11) -> None:
    """Write ``count`` notes of 20 to 400 random pieces each into ``root``."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for n in range(count):
        prefix = rng.choice(["", "", "---\ntitle: t\n---\n", "\ufeff"])
        body = "".join(rng.choices(PIECES, k=rng.randint(20, 400)))
        newline = rng.choice(["\n", "\n", "\r\n", "\r"])
        (root / f"a{n:05d}.md").write_bytes((prefix + body).replace("\n", newline).encode())


def _record(wikilinks: Any, text: str) -> tuple[Any, ...]:
    links = tuple(
        (link.start, link.end, link.target, link.concept, link.embed, text[link.start : link.end])
        for link in wikilinks.find_links(text)
    )
    facts = wikilinks.extract_note(text)
    fm = wikilinks.parse_frontmatter(text)
    return (
        links,
        tuple(facts.concepts.items()),
        facts.title,
        facts.created,
        facts.dropped,
        facts.warnings,
        facts.body_start,
        (fm.title, fm.created, fm.body_start, fm.warning),
    )


def worker(tree: str, files: str, out: str) -> None:
    """Child process: extract every note listed in ``files`` with the package under ``tree``."""
    wikilinks = _module("contextgraph.notes.wikilinks", "contextgraph.wikilinks")
    if not Path(wikilinks.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"imported {wikilinks.__file__}, not the tree {tree}")
    paths = Path(files).read_text(encoding="utf-8").splitlines()
    texts = [Path(p).read_bytes().decode("utf-8", errors="replace") for p in paths]
    started = time.process_time()
    for text in texts:
        wikilinks.extract_note(text)
    cpu = time.process_time() - started
    records = [_record(wikilinks, text) for text in texts]
    Path(out).write_bytes(pickle.dumps({"cpu": cpu, "records": records}))


def _run(tree: Path, files: Path, work: Path) -> dict[str, Any]:
    out = work / "out.pickle"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, __file__, "--worker", str(tree), str(files), str(out)],
        env=env,
        check=True,
    )
    result: dict[str, Any] = pickle.loads(out.read_bytes())
    return result


def _old_tree(base: str, work: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", base, "contextgraph"],
        check=True,
        capture_output=True,
    ).stdout
    tree = work / "old"
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def compare(name: str, paths: list[Path], old: Path, work: Path, runs: int) -> dict[str, Any]:
    files = work / f"{name}.files"
    files.write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    records: dict[str, list[Any]] = {}
    for _ in range(runs):
        for side, tree in (("old", old), ("new", REPO)):
            result = _run(tree, files, work)
            cpu[side].append(result["cpu"])
            if side in records:
                if result["records"] != records[side]:
                    raise SystemExit(f"{side} extraction is not deterministic on {name}")
            else:
                records[side] = result["records"]
    differ = [
        str(path)
        for path, a, b in zip(paths, records["old"], records["new"], strict=True)
        if a != b
    ]
    return {
        "name": name,
        "notes": len(paths),
        "differ": len(differ),
        "examples": differ[:10],
        "old_cpu_s": round(statistics.median(cpu["old"]), 3),
        "new_cpu_s": round(statistics.median(cpu["new"]), 3),
        "old_runs": [round(c, 3) for c in cpu["old"]],
        "new_runs": [round(c, 3) for c in cpu["new"]],
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the older revision (default HEAD)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (median)")
    parser.add_argument("--bench-notes", type=int, default=10_000, help="0: no bench vault")
    parser.add_argument("--adversarial", type=int, default=0, help="random notes to add")
    parser.add_argument("folders", nargs="*", type=Path)
    args = parser.parse_args(argv)
    folders = args.folders or ([CORPORA] if CORPORA.is_dir() else [])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = _old_tree(args.base, work)
        sets = [(str(folder), sorted(folder.rglob("*.md"))) for folder in folders]
        if args.bench_notes:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench import generate_vault

            vault = work / "bench-vault"
            generate_vault(vault, args.bench_notes)
            sets.append((f"bench vault, {args.bench_notes} notes", sorted(vault.rglob("*.md"))))
        if args.adversarial:
            notes = work / "adversarial"
            adversarial_notes(notes, args.adversarial)
            sets.append((f"adversarial, {args.adversarial} notes", sorted(notes.glob("*.md"))))
        report = [
            compare(str(i), paths, old, work, args.runs) | {"name": name}
            for i, (name, paths) in enumerate(sets)
        ]
    print(json.dumps({"base": args.base, "runs": args.runs, "sets": report}, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(*sys.argv[2:5])
    else:
        main(sys.argv[1:])
