"""Readiness probe for the local HBase started by scripts/hbase.

One attempt, through the Thrift1 gateway with happybase's defaults (buffered
transport, binary protocol): create a uniquely named table, put a row, read it
back, drop the table.  With ``--thrift2-port``, the row is also read back
through the Thrift2 gateway (same transport and protocol), which must say it
serves Thrift2.  Exit status 0 when all of that worked, 1 otherwise (the
reason is printed on the last line of stderr).  scripts/hbase retries.

An open port or a working ``tables()`` is not enough: the Thrift server listens
before the master has finished initialising, and reads work before DDL does.

``--lib DIR`` appends DIR to the import path (after site-packages), where
scripts/hbase installs happybase when the interpreter has none of its own.
``--check-import`` only checks that happybase can be imported.
"""

import argparse
import contextlib
import io
import os
import sys
import time

PREFIX = "shdb_probe_"
STALE_AFTER_S = 600

# The two Thrift2 calls the probe makes (field ids as in HBase's thrift2
# service), so that the probe needs nothing but thriftpy2, which happybase uses.
THRIFT2_PROBE_IDL = """
struct TColumnValue { 1: required binary family, 2: required binary qualifier,
                      3: required binary value, 4: optional i64 timestamp }
struct TResult { 1: optional binary row, 2: required list<TColumnValue> columnValues }
struct TGet { 1: required binary row }
exception TIOError { 1: optional string message }
enum TThriftServerType { ONE = 1, TWO = 2 }
service THBaseService {
  TResult get(1: required binary table, 2: required TGet tget) throws (1: TIOError io)
  TThriftServerType getThriftServerType()
}
"""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9090)
    p.add_argument("--thrift2-port", type=int, help="also read back through Thrift2 here")
    p.add_argument(
        "--timeout-ms", type=int, default=30000, help="socket timeout of each Thrift call"
    )
    p.add_argument("--lib", help="extra import directory for happybase")
    p.add_argument("--check-import", action="store_true")
    return p.parse_args(argv)


def drop_stale_tables(conn):
    """Drop probe tables left by interrupted earlier probes (older than 10 min)."""
    now = time.time()
    for name in conn.tables():
        name = name.decode()
        if not name.startswith(PREFIX):
            continue
        try:
            created = int(name.rsplit("_", 1)[1]) / 1000.0
        except (IndexError, ValueError):
            continue
        if now - created > STALE_AFTER_S:
            with contextlib.suppress(Exception):
                conn.delete_table(name, disable=True)


def read_through_thrift2(host, port, timeout_ms, table, row):
    import thriftpy2
    from thriftpy2.rpc import make_client

    idl = thriftpy2.load_fp(io.StringIO(THRIFT2_PROBE_IDL), "shdb_probe_thrift")
    client = make_client(idl.THBaseService, host, port, timeout=timeout_ms)
    try:
        kind = client.getThriftServerType()
        if kind != idl.TThriftServerType.TWO:
            raise RuntimeError(f"port {port} serves Thrift type {kind}, not Thrift2")
        result = client.get(table.encode(), idl.TGet(row=row))
        values = {(c.family, c.qualifier): c.value for c in result.columnValues or []}
        if values.get((b"f", b"q")) != b"ok":
            raise RuntimeError(f"Thrift2 read back {values!r} instead of the probe cell")
    finally:
        client.close()


def probe(host, port, timeout_ms, thrift2_port=None):
    import happybase

    # Name: prefix, pid, creation time in ms (used by drop_stale_tables).
    name = f"{PREFIX}{os.getpid()}_{int(time.time() * 1000)}"
    conn = happybase.Connection(host=host, port=port, timeout=timeout_ms)
    created = False
    try:
        conn.create_table(name, {"f": dict(max_versions=1)})
        created = True
        table = conn.table(name)
        table.put(b"probe-row", {b"f:q": b"ok"})
        row = table.row(b"probe-row")
        if row.get(b"f:q") != b"ok":
            raise RuntimeError(f"read back {row!r} instead of the probe cell")
        if thrift2_port is not None:
            read_through_thrift2(host, thrift2_port, timeout_ms, name, b"probe-row")
        conn.delete_table(name, disable=True)
        created = False
        drop_stale_tables(conn)
    finally:
        if created:
            with contextlib.suppress(Exception):
                conn.delete_table(name, disable=True)
        conn.close()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.lib:
        sys.path.append(args.lib)
    try:
        import happybase  # noqa: F401
    except ImportError as exc:
        print(f"happybase not importable: {exc}", file=sys.stderr)
        return 1
    if args.check_import:
        return 0
    try:
        probe(args.host, args.port, args.timeout_ms, args.thrift2_port)
    except Exception as exc:
        msg = str(exc).strip().splitlines()
        print(
            "not ready: {}: {}".format(type(exc).__name__, msg[0] if msg else ""), file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
