"""The HBase schema: hbase-tables.json (the one source) and the hbase-shell script
generated from it. Installed as ``simhash_hbase.schema`` (pyproject.toml package-dir)."""
