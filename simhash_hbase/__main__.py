"""`python -m simhash_hbase` is `shdb`."""

from .cli import main

main()
