"""The Scrapy pipeline's index process: it holds the index, and extracts, fingerprints,
checks and writes each batch, beside the crawl on another core.

Everything CPU-heavy a page costs (HTML extraction, segmentation, the fingerprint and
sketch, the lookups and the write) runs here, so Scrapy's process spends its core on
crawling. The process is ``python -m simhash_hbase.integrations.indexer``: it imports
what the index needs and no more (a multiprocessing child would import Scrapy and the
crawl's main module too, and start twice as slowly). Requests (function name,
arguments) and replies go over the one worker transport
(:mod:`simhash_hbase.fingerprint.workers`); errors cross back as
:class:`StoreError` (retried) or :class:`ShdbError`, with their messages.

An item is answered on its own: its matches, None (no usable terms) or a
:data:`Refusal` (it cannot be indexed: a lone surrogate, an id over the limit, a page
that broke the extraction); its batch-mates are checked and written all the same. Only
a store failure fails a batch.

Items are fed ahead of their batch (``prepare``, no reply): the process extracts and
fingerprints them while the batch still gathers, so that a batch's check
(``check_batch``) is left with the lookups and the write, 0.10 to 0.12 ms a page against
0.7 to 0.8 ms for the extraction and fingerprints (the benchmark's pages). The last
batch of a crawl, which the crawl waits for, is then mostly written by the time it goes.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from simhash_hbase.errors import EmptyDocument, ShdbError, StoreError
from simhash_hbase.fingerprint.workers import Channel, spawn
from simhash_hbase.layout.window import Window
from simhash_hbase.records import Document, Matches

if TYPE_CHECKING:  # the crawl imports this module for IndexProcess, not the index:
    # numpy, the store and the fingerprint are the index process's (0.3 s of CPU)
    from simhash_hbase.index.client import SimhashIndex

# (id, raw text or HTML, "text" or "html"), as the pipeline queued it
Item = tuple[str, str, str]
Prepared = tuple[Document, list[int]] | None
Fed = Prepared | ShdbError  # an item prepared, or why it cannot be (a StoreError: the store's)
#: Why one item is not indexed: the kind of problem (its error's class), and the message
Refusal = tuple[str, str]
Answer = Matches | Refusal | None

WARM_UP = "爬虫抓取的网页正文"  # a text whose fingerprint loads the segmenter's dictionary

_index: SimhashIndex | None = None
_last: tuple[int, list[Fed]] | None = None  # the last batch prepared, for its retries
# items fed ahead of their batch, in order; a ShdbError in place of one that failed
_fed: deque[Fed] = deque()


class IndexerDied(ShdbError):
    """The pipeline's index process died: the crawl stops as on a store failure."""


class IndexProcess:
    """The crawl's handle on its index process; one call at a time (the pipeline's
    worker thread makes them all). The process has a session of its own, so Ctrl-C
    stops the crawl only, whose graceful close still writes its last batch through it;
    it exits when the crawl closes its channel, or dies."""

    def __init__(self, url: str, create: bool = False) -> None:
        """Start the process and ask it to open ``url`` (or ``create`` it), without
        waiting: the index opens while the crawl goes on starting. :meth:`opened`
        waits for it."""
        self.url = url
        self.create = create
        self.created = False  # whether the open created the index
        self._proc, sock = spawn("simhash_hbase.integrations.indexer", new_session=True)
        self._channel = Channel(sock)
        self._unanswered = True  # the open
        self._send("open_index", url, create)

    def opened(self) -> IndexProcess:
        """This process once its index is open; an index that cannot be opened raises
        (and the process ends)."""
        if self._unanswered:
            try:
                self._unanswered = False
                self.created = bool(self._receive())
            except ShdbError:
                self._end()
                raise
        return self

    def call(self, name: str, *args: Any) -> Any:
        """``name(*args)`` in the process, its result or its error."""
        self.opened()
        self._send(name, *args)
        return self._receive()

    def feed(self, items: list[Item]) -> None:
        """Hand over items ahead of their batch, without waiting: the process prepares
        them meanwhile, and the next :meth:`call` of ``check_batch`` counts them."""
        self.opened()
        self._send("prepare", items)

    def _send(self, name: str, *args: Any) -> None:
        try:
            self._channel.send((name, args))
        except OSError as exc:
            raise self._died() from exc

    def _receive(self) -> Any:
        try:
            kind, value = self._channel.receive()
        except (EOFError, OSError) as exc:
            raise self._died() from exc
        if kind == "ok":
            return value
        raise (StoreError if kind == "store" else ShdbError)(value)

    def _died(self) -> IndexerDied:
        return IndexerDied(f"the pipeline's index process died (exit code {self._proc.poll()})")

    def close(self) -> None:
        """Close the index, then end the process (one that died has nothing to close)."""
        try:
            if self._proc.poll() is None and not self._unanswered:
                with suppress(IndexerDied):  # killed, not yet reaped: nothing to close
                    self.call("close_index")
        finally:
            self._end()

    def _end(self) -> None:
        self._channel.close()  # the process's loop ends at end of input
        self._proc.wait()


def open_index(url: str, create: bool = True) -> bool:
    """Open the index at ``url``, or create it (``create``, as :meth:`SimhashIndex.open`;
    the pipeline passes SHDB_CREATE); whether it was created."""
    global _index
    from simhash_hbase.index.client import SimhashIndex

    _index = SimhashIndex.open(url, create=create)
    return _index.created


def warm_up() -> None:
    """Load the segmenter's whole dictionary while Scrapy starts: a crawl cuts more
    than the few texts that per-text dictionaries serve for less (0.1 s of CPU once,
    instead of 0.07 s of per-text lookups in the first pages and the same 0.1 s then)."""
    from simhash_hbase.fingerprint import segment

    segment.preload()
    _prepared(_held(), "warm-up", WARM_UP, "text")


def prepare(items: list[Item]) -> None:
    """Extract and fingerprint items fed ahead of their batch (no reply: an error
    waits for the batch's check)."""
    index = _held()
    _fed.extend(_prepared(index, *item) for item in items)


def check_batch(
    seq: int,
    fed: int,
    items: list[Item],
    limit: int,
    similarity: float | None = None,
    within: int | None = None,
) -> list[Answer]:
    """Check and add one batch, in order (``check_and_add``, the predicate ``shdb
    ingest`` uses): its first ``fed`` items were fed ahead (:func:`prepare`), the
    rest are ``items``. Each item's :data:`Answer`; an item that is not indexed does
    not keep the others from being. A store error fails the batch (the pipeline
    retries it); a retry of batch ``seq`` reuses its fingerprints. ``similarity``:
    judged at it (None: the index's; :meth:`SimhashIndex.at_similarity`); ``within``:
    matching only documents that arrived that many ms before now (None: every one)."""
    global _last
    index = _held()
    if _last is None or _last[0] != seq:
        ahead = [_fed.popleft() for _ in range(fed)]
        _last = (seq, [*ahead, *(_prepared(index, *item) for item in items)])
    for fed_item in _last[1]:
        if isinstance(fed_item, StoreError):
            raise fed_item
    usable = [p for p in _last[1] if isinstance(p, tuple)]
    found = iter(
        index.at_similarity(similarity)
        .within(None if within is None else Window.last(within))
        .check_and_add(
            [doc for doc, _ in usable],
            probes=[fps for _, fps in usable],
            always=True,
            limit=limit,
        )
    )
    return [_answer(p, found) for p in _last[1]]


def _answer(fed: Fed, found: Iterator[Matches]) -> Answer:
    if isinstance(fed, ShdbError):
        return type(fed).__name__, str(fed)
    return None if fed is None else next(found)


def close_index() -> None:
    global _index
    if _index is not None:
        _index.close()
        _index = None


def _held() -> SimhashIndex:
    if _index is None:
        raise ShdbError("the pipeline's index process has no index open")
    return _index


def _prepared(index: SimhashIndex, doc_id: str, raw: str, fmt: str) -> Fed:
    """The item's document and probes; None for no usable terms; else why it cannot
    be indexed (a StoreError: the store failed)."""
    try:
        return index.prepare_text(doc_id, raw, fmt)
    except EmptyDocument:
        return None
    except ShdbError as exc:  # a bad id, not Unicode text, a page its parser refuses
        return exc
    except Exception as exc:  # a page that breaks a parser or the segmenter is that
        # page's failure, not the crawl's: it must not end the index process
        return ShdbError(f"{doc_id!r:.80}: {type(exc).__name__}: {exc}")


CALLS: dict[str, Callable[..., Any]] = {
    "open_index": open_index,
    "check_batch": check_batch,
    "close_index": close_index,
}
ONE_WAY: dict[str, Callable[..., None]] = {"prepare": prepare}  # no reply


def _reply(channel: Channel) -> str | None:
    """Answer one request; the name of the call, None at end of input or once no one
    reads the replies."""
    try:
        name, args = channel.receive()
    except EOFError:
        return None
    if name in ONE_WAY:
        ONE_WAY[name](*args)
        return str(name)
    try:
        reply: tuple[str, Any] = ("ok", CALLS[name](*args))
    except StoreError as exc:  # our errors as their kind and message: some of them
        reply = ("store", str(exc))  # take several arguments, and would not unpickle
    except ShdbError as exc:
        reply = ("error", str(exc))
    try:
        channel.send(reply)
    except ConnectionError:  # the crawl is gone (it ended, or never took this process)
        return None
    return str(name)


def main() -> None:
    channel = Channel.of_fd(int(sys.argv[1]))
    while (name := _reply(channel)) is not None:
        if name == "open_index" and _index is not None:
            warm_up()  # while Scrapy starts fetching
    close_index()
    # The index is closed and every reply flushed: what remains is the interpreter's
    # teardown (freeing the segmenter's dictionary, numpy, the store's modules), 0.05
    # to 0.07 s here, which the crawl would wait for at close.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
