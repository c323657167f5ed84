#!/usr/bin/env python3
"""Write contextgraph/store/schema_sqlite.json anew: run it after adding a migration.

    python scripts/schema_snapshot.py

It migrates a scratch SQLite file to head with Alembic, step by step, and writes that file's
catalogue as the snapshot a blank database is created from (contextgraph/store/blank.py).
tests/test_migrations.py fails until the shipped snapshot is what the migrations build.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from alembic import command

from contextgraph.store import blank, db


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        engine = db.make_engine(Path(scratch) / "head.db")
        try:
            command.upgrade(db.alembic_config(engine), "head")
            with engine.connect() as conn:
                snapshot = blank.dump(conn)
        finally:
            engine.dispose()
    blank.SNAPSHOT.write_text(json.dumps(snapshot, indent=1) + "\n", encoding="utf-8")
    print(
        json.dumps(
            {
                "path": str(blank.SNAPSHOT),
                "revision": snapshot["revision"],
                "objects": len(snapshot["objects"]),
            }
        )
    )


if __name__ == "__main__":
    main()
