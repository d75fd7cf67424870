"""The embedded store: LMDB on local disk, no server
(:class:`~simhash_hbase.store.lmdb.store.EmbeddedStore`).

Nothing is imported here. The modules, by concern:

- ``store``: the store (opening and checking the file, errors, meta, the protocol),
  over one of two backends: ``format1`` (the older layout, a key per cell) or the
  compact format (2 to 4, today's): ``tables`` (its tables and reads), ``commit``
  (the commit protocol of a batch), ``merge`` (the fresh tier into the index),
  ``load`` (bulk load), over ``cells`` (constants, the state record, packed
  cells), ``buckets`` (writing a bucket: growing, spilling hot leads),
  ``filters`` (the tiers' prefix filters) and ``probes`` (a query's probes and a
  batch's matches: the references of the C kernels);
- ``columns``: how rows are written as LMDB keys and values (packed columns,
  folded keys, key order), shared by both backends;
- ``free`` (LMDB's free list, read without LMDB) and ``pages`` (mapping the
  file's pages ahead of the queries).
"""
