"""Which file names are code or config files: what every scan asks, without the code model."""

from __future__ import annotations

CODE_EXTENSIONS: frozenset[str] = frozenset({".py", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx"})
CONFIG_FILENAMES: frozenset[str] = frozenset({"tsconfig.json", "jsconfig.json"})
