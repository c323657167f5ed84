"""What the command line prints, in the standard library only: shared by the click commands
(:mod:`contextgraph.cli`) and the runs that answer without loading them
(:mod:`contextgraph.sync.unchanged`)."""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from typing import Any

# Control characters but the tab, which is harmless, and the bidirectional controls (an
# override turns "rl\u202egnp.exe" into what reads as "rlexe.png").
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` for one line of a terminal: control characters but the tab (a line break, or
    an escape sequence that would recolour or retitle the terminal, in a file or concept name
    or a snippet of a file) and bidirectional controls are written as their Python escapes
    (``\\n``, ``\\x1b``, ``\\u202e``)."""
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


def json_text(data: Any) -> str:
    """The one JSON document a ``--json`` command prints (without its final line break)."""
    return json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False)  # NaN is no JSON
