"""The newest schema revision, for code that must not import Alembic or SQLAlchemy to ask.

tests/test_migrations.py checks it matches the last of ``migrations/versions``.
"""

SCHEMA_HEAD = "0008_fts_marks"
