"""What the command line prints, in the standard library only: shared by the click commands
(:mod:`contextgraph.cli`) and the runs that answer without loading them
(:mod:`contextgraph.sync.unchanged`)."""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing itself costs a light CLI run 20 ms; mypy honours the name
if TYPE_CHECKING:
    from typing import Any

_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # a tab is harmless


def shown(text: str) -> str:
    """``text`` for one line of a terminal: control characters but the tab (a line break, or
    an escape sequence that would recolour or retitle the terminal, in a file or concept name
    or a snippet of a file) are written as their Python escapes (``\\n``, ``\\x1b``)."""
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


def json_text(data: Any) -> str:
    """The one JSON document a ``--json`` command prints (without its final line break)."""
    return json.dumps(data, ensure_ascii=False, indent=2)
