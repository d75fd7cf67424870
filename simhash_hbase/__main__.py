"""`python -m simhash_hbase` is `shdb`."""

from simhash_hbase.cli import main

main()
