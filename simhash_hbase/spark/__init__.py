"""Spark jobs over the same scheme and tables: corpus-wide dedup, HBase backfill, and
verify and stats of an HBase index (`verify.py`).

Needs the ``spark`` extra (PySpark 4, Java 17+). Nothing here imports PySpark at
module import time, so ``shdb --help`` stays fast without it.
"""
