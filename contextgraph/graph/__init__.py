"""Queries over the store and the tables derived from it.

Search, expand, retrieve, BuildContext, reading notes, communities, relation weights and the
Mermaid view. They read the store (:mod:`contextgraph.store`) and use the text rules of
:mod:`contextgraph.notes` and :mod:`contextgraph.code`; they never scan folders.
"""
