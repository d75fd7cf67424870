"""The HBase store: :class:`~simhash_hbase.store.hbase.store.HBaseStore` over a Thrift
gateway (``thrift2``, the default, or ``thrift1``, behind the small
:class:`~simhash_hbase.store.hbase.transport.Transport` interface).

Nothing is imported here: ``settings`` (the ``hbase://`` URL) and ``tables`` (the
schema) are read without the ``hbase`` extra (thriftpy2, happybase), which only
``store``, ``transport``, ``thrift1`` and ``thrift2`` need.
"""
