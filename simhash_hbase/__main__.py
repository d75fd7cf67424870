"""`python -m simhash_hbase` is `shdb`."""

from simhash_hbase.cli.app import main

main()
