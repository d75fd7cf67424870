"""Glue to the tools crawl teams already run (a surface, like ``cli`` and ``serve``).

Each module imports its tool lazily, so the package itself needs none of them.
"""
