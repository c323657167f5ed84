"""Markdown notes as text: WikiLinks, frontmatter, what is code, previews.

Pure functions of a note's text; no database. The sync turns their results into rows.
"""
