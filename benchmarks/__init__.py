"""Benchmarks and detection-quality evaluation of simhash-hbase (not part of the wheel).

    python -m benchmarks.bench [--smoke|--quick|--full]   # performance: docs/benchmarks.md
    python -m benchmarks.eval  [--smoke|--quick]          # quality: docs/quality.md

Both suites are made of *sections* (benchmarks/registry.py): a section measures
against a baseline in the same run, returns JSON-able results and reports
*figures* (value, baseline, ratio, target, met/missed, what bounds a miss) plus an
optional report body from a template in benchmarks/templates/. See
benchmarks/README.md for how to add one.
"""
