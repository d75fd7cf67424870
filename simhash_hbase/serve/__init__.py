"""`shdb serve`: the index as an HTTP service (docs/serve.md).

Needs the ``serve`` extra (Starlette, uvicorn, orjson, prometheus_client); the
thin client, :class:`simhash_hbase.index.remote.RemoteIndex`, needs nothing.
"""
