"""Input layer: readers (files, folders, JSONL, CSV, stdin) and HTML to text.

Nothing here knows about fingerprints or stores; readers yield plain records.
"""
