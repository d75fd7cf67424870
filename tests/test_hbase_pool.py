"""ClientPool.call_many: calls in flight on several connections from one thread.

Fake clients stand in for Thrift connections, so the order of writes and reads,
the follow-up calls and what happens to each connection after a failure are
checked without a server (the HBase suites run the real thing).
"""

from __future__ import annotations

import pytest
from thriftpy2.transport import TTransportException

from simhash_hbase.store.hbase.connect import Gateways
from simhash_hbase.store.hbase.metrics import GatewayStats
from simhash_hbase.store.hbase.settings import Gateway, Wire
from simhash_hbase.store.hbase.transport import ClientPool


class FakeClient:
    """A connection that records what it was sent; ``log`` is shared by all of them."""

    def __init__(self, number: int, log: list[str], dead: bool = False) -> None:
        self.number, self.log, self.dead = number, log, dead
        self.pending: list[str] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def send(self, job: str) -> None:
        self.log.append(f"send {job} on {self.number}")
        self.pending.append(job)

    def receive(self) -> str:
        if self.dead:
            raise TTransportException(TTransportException.END_OF_FILE, "dropped")
        job = self.pending.pop(0)
        self.log.append(f"read {job} on {self.number}")
        if job == "bad":
            raise ValueError("the server refused it")
        return job


class FakeGateways(Gateways):
    """One gateway whose connections are :class:`FakeClient` s."""

    def __init__(self, pool: Pool) -> None:
        super().__init__([Gateway("fake", 1)], Wire(), 1000, "hbase://fake:1", GatewayStats())
        self.pool = pool

    def connect(self) -> tuple[Gateway, FakeClient]:
        pool = self.pool
        client = FakeClient(len(pool.opened), pool.log, dead=pool.dead_left > 0)
        pool.dead_left -= 1
        pool.opened.append(client)
        return self.all[0], client


class Pool:
    def __init__(self, size: int, dead: int = 0) -> None:
        self.log: list[str] = []
        self.opened: list[FakeClient] = []
        self.dead_left = dead  # the first ``dead`` clients opened have a dropped socket
        self.pool: ClientPool[FakeClient] = ClientPool(
            FakeGateways(self), lambda client: client, size, retries=3
        )

    def run(self, jobs: list[str], pages: int = 1) -> list[str]:
        """Each job's reply is followed by ``pages - 1`` follow-up jobs ``job+1``, ..."""

        def send(client: FakeClient, job: str) -> None:
            client.send(job)

        def receive(client: FakeClient, job: str) -> tuple[str, str | None]:
            got = client.receive()
            page = got.count("+")
            return got, (job + "+" if page + 1 < pages else None)

        return self.pool.call_many("test", jobs, send, receive)


def test_every_request_is_sent_before_the_first_reply_is_read() -> None:
    p = Pool(size=4)
    assert p.run(["a", "b", "c"]) == ["a", "b", "c"]
    assert p.log == [
        "send a on 0",
        "send b on 1",
        "send c on 2",
        "read a on 0",
        "read b on 1",
        "read c on 2",
    ]


def test_connections_are_reused_and_at_most_size_are_in_flight() -> None:
    p = Pool(size=2)
    assert p.run(["a", "b", "c", "d"]) == ["a", "b", "c", "d"]
    assert len(p.opened) == 2
    assert p.log[:3] == ["send a on 0", "send b on 1", "read a on 0"]
    assert p.log[3] == "send c on 0"  # a's connection, free again
    p.log.clear()
    p.run(["e"])
    assert p.log == ["send e on 1", "read e on 1"]  # an idle connection, no new one
    assert len(p.opened) == 2


def test_a_follow_up_goes_out_on_the_same_connection() -> None:
    p = Pool(size=4)
    assert sorted(p.run(["a", "b"], pages=3)) == ["a", "a+", "a++", "b", "b+", "b++"]
    sent_on = {line.split()[1]: line.split()[-1] for line in p.log if line.startswith("send")}
    assert sent_on == {"a": "0", "a+": "0", "a++": "0", "b": "1", "b+": "1", "b++": "1"}


def test_a_failure_closes_every_connection_with_an_unread_reply() -> None:
    p = Pool(size=4)
    with pytest.raises(ValueError, match="refused"):
        p.run(["a", "bad", "c"])
    assert [c.closed for c in p.opened] == [False, True, True]  # a was read: it is reused
    p.log.clear()
    assert p.run(["d"]) == ["d"]
    assert p.log == ["send d on 0", "read d on 0"]


def test_dropped_connections_are_retried_from_the_start() -> None:
    p = Pool(size=3, dead=2)
    assert p.run(["a", "b"]) == ["a", "b"]
    assert [c.closed for c in p.opened[:2]] == [True, True]
    assert p.log[-2:] == ["read a on 2", "read b on 3"]


def test_a_closed_pool_refuses() -> None:
    p = Pool(size=2)
    p.pool.close()
    with pytest.raises(Exception, match="closed"):
        p.run(["a"])
