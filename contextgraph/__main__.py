"""``python -m contextgraph`` and the ``contextgraph`` script: forward a query, else run it here."""

from __future__ import annotations

import sys

from contextgraph import launch


def main() -> None:
    """Have a resident server answer (:mod:`contextgraph.launch`), else run the CLI here."""
    try:
        code = launch.forward(sys.argv[1:])
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(launch.EXIT_INTERRUPTED)
    if code is not None:
        sys.exit(code)
    from contextgraph.cli import main as run_here

    run_here()


if __name__ == "__main__":
    main()
