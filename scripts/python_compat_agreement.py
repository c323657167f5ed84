"""Check that the newer-Python fallback agrees with ``ast`` on every file both can read.

Forces every ``.py`` file under the given folders (default: this Python's standard library and
``../shared/eval/*/tree``) through :func:`contextgraph.code.python_compat.downlevel` and
compares the facts with those of the running ``ast``. Prints JSON:
``{"files", "agree", "differ", "rewriteFails", "astRefuses", "seconds", "examples"}``.

    python scripts/python_compat_agreement.py [FOLDER ...]
"""

from __future__ import annotations

import ast
import json
import sys
import sysconfig
import time
import warnings
from pathlib import Path

from contextgraph.code import CodeParseError
from contextgraph.code.python import facts_of, parse_python
from contextgraph.code.python_compat import downlevel


def _default_roots() -> list[Path]:
    shared = Path(__file__).resolve().parents[2] / "shared" / "eval"
    return [Path(sysconfig.get_paths()["stdlib"]), *sorted(shared.glob("*/tree"))]


def main(argv: list[str]) -> None:
    roots = [Path(a) for a in argv] or _default_roots()
    files = sorted(
        p for root in roots for p in root.rglob("*.py") if "site-packages" not in p.parts
    )
    counts = {"agree": 0, "differ": 0, "rewriteFails": 0, "astRefuses": 0}
    examples: list[str] = []
    started = time.perf_counter()
    for path in files:
        text = path.read_text("utf-8", "replace")
        try:
            want = parse_python(str(path), text)
        except CodeParseError:
            counts["astRefuses"] += 1
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = facts_of(str(path), ast.parse(downlevel(text)))
        except SyntaxError:
            counts["rewriteFails"] += 1
            examples.append(str(path))
            continue
        if got == want:
            counts["agree"] += 1
        else:
            counts["differ"] += 1
            examples.append(str(path))
    print(
        json.dumps(
            {
                "files": len(files),
                **counts,
                "seconds": round(time.perf_counter() - started, 2),
                "examples": examples[:20],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
