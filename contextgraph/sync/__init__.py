"""Folders into the store: scan, parse in worker processes, apply in batches; write notes.

The top of the layers below the doors: a sync parses files with :mod:`contextgraph.notes` and
:mod:`contextgraph.code`, writes rows through :mod:`contextgraph.store`, and then asks
:mod:`contextgraph.graph` to refresh what it derives (communities, relation weights).
"""
