"""The ``shdb`` command line: thin commands that parse, call one job and render."""

from simhash_hbase.cli.app import app, main

__all__ = ["app", "main"]
