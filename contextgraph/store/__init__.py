"""The database: engine and transactions, the schema and its migrations, the ``meta`` table.

Everything here speaks SQL (SQLAlchemy Core, one seam per dialect in :mod:`.dialect`) and knows
nothing of markdown or source code. It imports only :mod:`contextgraph.errors`,
:mod:`contextgraph.settings` and :mod:`contextgraph.limits` from outside itself.
"""
