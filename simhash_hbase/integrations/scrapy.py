"""A Scrapy item pipeline that tags or drops near-copies, against an index that persists.

Enable it in a Scrapy project's settings::

    ITEM_PIPELINES = {"simhash_hbase.integrations.scrapy.NearDuplicatePipeline": 300}
    SHDB_INDEX = "crawl.shdb"  # or hbase://HOST:9091?prefix=NAME, or http://HOST:8080 (serve)

Each item is checked against the index and then added to it, in batches: an item
waits (without blocking the reactor) until its batch is written, so the answer it
gets is the one ``shdb ingest --report`` gives for the same pages in the same order,
and an item that went on down the pipeline is in the index. A separate process
(:mod:`simhash_hbase.integrations.indexer`) holds the index and extracts,
fingerprints, checks and writes each batch; one worker thread here hands it the
items as they gather (:data:`FEED_ITEMS` at a time, so that it fingerprints them while
the batch lingers), then the batches in arrival order, and retries a failing store.
See docs/scrapy.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import MISSING, dataclass, fields
from difflib import get_close_matches
from functools import partial
from itertools import count, groupby
from typing import TYPE_CHECKING, Any, ClassVar

try:
    from scrapy import signals
    from scrapy.exceptions import DropItem
except ImportError as exc:  # the hint is the point of this module's import
    raise ImportError(
        "simhash_hbase.integrations.scrapy needs Scrapy: pip install 'simhash-hbase[scrapy]'"
    ) from exc

from simhash_hbase.errors import (
    BatchRefused,
    InvalidInput,
    InvalidSetting,
    ShdbError,
    StoreError,
)
from simhash_hbase.fingerprint.minhash import check_similarity
from simhash_hbase.integrations.indexer import Answer, IndexProcess
from simhash_hbase.integrations.item_fields import TAG_FIELD, FieldWatch, Said, untaggable
from simhash_hbase.layout.window import Window, duration_ms
from simhash_hbase.records import Matches

if TYPE_CHECKING:  # imported where used: the crawl process starts without them
    from simhash_hbase.index.remote import RemoteIndex

ACTIONS = ("drop", "tag")
STATS = "shdb/"
# A near-copy is the pipeline's expected outcome, counted in shdb/dropped; Scrapy's
# WARNING default would log every dropped item whole (its HTML included), every page
# of a re-crawl. Its own line stays at DEBUG: DROPS says the drop in one line.
DROP_LOG_LEVEL = "DEBUG"
#: One INFO line a dropped item, naming it and the page kept (the dropped URL is
#: otherwise in no log but DEBUG's item dump); its own logger, to quieten alone.
DROPS = logging.getLogger(f"{__name__}.drops")
# Items are handed to the index process this many at a time, ahead of their batch: a
# hand-over costs the reactor about what a few items' own work does, and the items
# not yet handed over when the batch goes are fingerprinted with its check.
FEED_ITEMS = 16
# Ids no longer than this many characters are within the index's limit of 1,024 bytes
# of UTF-8 whatever they hold; a longer one is checked by the index's own rule.
_SHORT_ID = 256


@dataclass(frozen=True)
class PipelineSettings:
    """The pipeline's settings, read from Scrapy's settings alone (``SHDB_*``)."""

    index: str
    id_field: str = "url"
    text_field: str = "text"
    html_field: str = "html"
    action: str = "drop"
    limit: int = 10
    batch_size: int = 200
    flush_seconds: float = 0.5
    linger_seconds: float = 0.05
    retries: int = 3
    #: Create the index when there is none (said once, as a warning); else a missing
    #: index stops the crawl at its start, so a mistyped SHDB_INDEX is not a new index.
    create: bool = False
    #: The crawl stops when none of its first this many items has the fields read
    #: (0: never); the first item without them is a warning (item_fields.FieldWatch).
    field_check_items: int = 100
    #: The similarity items are judged at (docs/nets.md); None: the index's.
    similarity: float | None = None
    #: Items match only documents that arrived this long before their batch (ms;
    #: SHDB_WITHIN = "30d"); None: every document.
    within: int | None = None

    @classmethod
    def from_scrapy(cls, settings: Any) -> PipelineSettings:
        """Every ``SHDB_*`` setting checked as the crawl starts: a name the pipeline
        does not know (a typo would be ignored), a value of the wrong kind or out of
        range is an :class:`InvalidSetting` naming the setting and what to give."""
        unknown = sorted(k for k in settings if k.startswith("SHDB_") and k not in SETTINGS)
        if unknown:
            near = get_close_matches(unknown[0], SETTINGS, n=1)
            raise InvalidSetting(
                unknown[0],
                f"{unknown[0]} is no setting of the shdb pipeline"
                + (f": did you mean {near[0]}?" if near else "")
                + f" (its settings: {', '.join(SETTINGS)}; docs/scrapy.md)",
            )
        if not settings.get("SHDB_INDEX"):
            raise InvalidSetting(
                "SHDB_INDEX",
                "SHDB_INDEX is not set: name the index in the Scrapy settings (a folder for "
                "the embedded store, or hbase://HOST:PORT/PREFIX)",
            )
        given = {
            f.name: _setting(settings, name, f.default)
            for f, name in zip(fields(cls), SETTINGS)
            if settings.get(name) is not None
        }
        made = cls(**given)
        made._check()
        return made

    def _check(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidSetting(
                "SHDB_ACTION", f"SHDB_ACTION is {self.action!r}: use 'drop' or 'tag'"
            )
        for name, low in _LOWEST.items():
            if getattr(self, name) < low:
                setting = f"SHDB_{name.upper()}"
                raise InvalidSetting(
                    setting, f"{setting} is {getattr(self, name)!r}: it must be at least {low}"
                )


#: Every setting's name, in the order of PipelineSettings' fields.
SETTINGS = tuple(f"SHDB_{f.name.upper()}" for f in fields(PipelineSettings))
#: The least each number may be.
_LOWEST = {
    "limit": 1,
    "batch_size": 1,
    "flush_seconds": 0.001,
    "linger_seconds": 0,
    "retries": 0,
    "field_check_items": 0,
}
#: What a value of each kind must be, said when it is not.
_KINDS = {
    bool: "True or False",
    int: "a whole number",
    float: "a number",
    str: "a non-empty string",
}


def _setting(settings: Any, name: str, default: Any) -> Any:
    """The value of ``name``, of its default's kind (index: a string): Scrapy's own
    conversion, as ``scrapy crawl -s NAME=VALUE`` gives strings."""
    value = settings.get(name)
    if name == "SHDB_SIMILARITY":  # a threshold, None by default: minhash's own check
        try:
            return _similarity_setting(value)
        except InvalidSetting as exc:
            raise InvalidSetting(name, str(exc)) from None
    if name == "SHDB_WITHIN":  # a duration, None by default: the window's own check
        try:
            return duration_ms(str(value), name)
        except InvalidInput as exc:
            raise InvalidSetting(name, f"{exc} (docs/scrapy.md)") from None
    kind = str if default is MISSING else type(default)
    try:
        if kind is bool:
            return settings.getbool(name)
        if kind is int:
            return settings.getint(name)
        if kind is float and math.isfinite(number := settings.getfloat(name)):
            return number
    except (TypeError, ValueError, OverflowError):
        pass
    else:
        if kind is float:  # not finite
            raise InvalidSetting(name, f"{name} is {value!r}: give a finite number")
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and value.strip():
            return value
    raise InvalidSetting(name, f"{name} is {value!r}: give {_KINDS[kind]} (docs/scrapy.md)")


@dataclass
class _Pending:
    doc_id: str
    raw: str
    fmt: str  # "text" or "html": HTML is extracted on the worker thread
    answer: asyncio.Future[Answer]
    fed: bool = False  # handed to the index process ahead of its batch

    @property
    def item(self) -> tuple[str, str, str]:
        return self.doc_id, self.raw, self.fmt


class IndexUnavailable(ShdbError):
    """The index named by SHDB_INDEX could not be opened: the crawl does not start."""


class OddItem(InvalidInput):
    """An item the index cannot take as it is (``kind`` names the problem): it passes
    through unchecked, counted, and the crawl goes on."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class NearDuplicatePipeline:
    """Tag (``near_duplicates``) or drop items whose text is a near-copy of one held."""

    def __init__(self, settings: PipelineSettings, crawler: Any) -> None:
        self.settings = settings
        self._crawler = crawler
        self._stats = crawler.stats
        self._log: Any = logging.getLogger(__name__)  # the spider's logger once open
        self._index: RemoteIndex | None = None  # shdb serve, for http(s) URLs
        self._indexer: IndexProcess | None = None  # else the index's own process
        self._batches = count()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shdb")
        self._pending: list[_Pending] = []
        self._unfed = 0  # the pending items not yet fed, the last ones
        self._timer: asyncio.TimerHandle | None = None
        self._since = self._last = 0.0  # the oldest and newest pending item's arrival
        self._flushes: set[asyncio.Future[Any]] = set()
        self._closing: asyncio.Future[Any] | None = None  # the engine's close, on failure
        self._failed: str | None = None
        self._warned: set[str] = set()  # the kinds of odd items logged once
        self._watch = FieldWatch(
            settings.id_field, settings.text_field, settings.html_field, settings.field_check_items
        )
        self._untaggable: dict[type, str | None] = {}  # tag mode: why a class cannot be tagged

    @classmethod
    def from_crawler(cls, crawler: Any) -> NearDuplicatePipeline:
        return cls(PipelineSettings.from_scrapy(crawler.settings), crawler)

    async def open_spider(self, spider: Any = None) -> None:
        """Open the index before the first request; a bad SHDB_INDEX stops the crawl here."""
        spider = spider or getattr(self._crawler, "spider", None)
        if spider is not None:
            self._log = spider.logger
        url = self.settings.index
        try:
            if _is_service(url):
                from simhash_hbase.index.remote import RemoteIndex

                remote = await self._run(RemoteIndex, url)
                self._index = remote.at_similarity(self.settings.similarity)
            else:
                self._indexer = await self._run(self._index_process(url).opened)
        except ShdbError as exc:
            raise IndexUnavailable(
                f"SHDB_INDEX={url!r} could not be opened: {exc}. Fix the setting (SHDB_CREATE "
                "= True creates a missing index), or start the store or service it names, "
                "then run the crawl again."
            ) from exc
        if self._indexer is not None and self._indexer.created:
            self._log.warning("shdb: created a new, empty index at %s (SHDB_CREATE)", url)
        self._log.info("shdb: checking items against %s (%s)", url, self.settings.action)

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        if self.settings.action == "tag":
            self._refuse_untaggable(type(item))
        adapter = _fields(item)
        said = self._watch.observe(adapter)
        if said is not None:
            self._say(said)
        doc_id = adapter.get(self.settings.id_field)
        if doc_id is None or doc_id == "":
            self._stats.inc_value(f"{STATS}skipped_no_id")
            return item
        try:
            _check_id(doc_id)
            content = self._content_of(adapter)
        except OddItem as exc:  # checked here: it never reaches the index, nor its batch
            self._stats.inc_value(f"{STATS}skipped_invalid")
            self._warn_once(exc.kind, doc_id, str(exc))
            return item
        except InvalidInput as exc:  # a body that is not text in any charset it declares
            self._stats.inc_value(f"{STATS}skipped_undecodable")
            self._log.warning("shdb: %s not checked: %s", doc_id, exc)
            return item
        if content is None:
            self._stats.inc_value(f"{STATS}skipped_no_text")
            return item
        if self._failed is not None:  # said once, as the crawl was stopped
            raise DropItem(f"not checked: {self._failed}", log_level=DROP_LOG_LEVEL)
        matches = await self._submit(doc_id, *content)  # counted by its batch (_count)
        if isinstance(matches, tuple):  # the index refused it: the batch went on
            self._warn_once(matches[0], doc_id, matches[1])
            return item
        if matches is None:
            return item
        if self.settings.action == "tag":
            return self._tagged(adapter, item, matches)
        if not matches:
            return item
        nearest = matches[0]
        why = (
            f"near-duplicate of {nearest.doc_id} (distance {nearest.distance}, similarity "
            f"{_similarity(nearest.similarity)}; {_count(matches)} held)"
        )
        DROPS.info("shdb: dropped %s: %s", doc_id, why)
        raise DropItem(why, log_level=DROP_LOG_LEVEL)

    async def close_spider(self, spider: Any = None) -> None:
        """Write the last batch, then close the index: nothing acknowledged is lost."""
        await self._flush()
        if self._flushes:  # not the engine's close (_closing): it waits for this one
            await asyncio.gather(*self._flushes, return_exceptions=True)
        if self._index is not None:
            await self._run(self._index.close)
        if self._indexer is not None:
            await self._run(self._indexer.close)
        self._worker.shutdown(wait=True)

    def _index_process(self, url: str) -> IndexProcess:
        """The one :class:`NearDuplicateAddon` started as the crawler started, else a
        new one (without the add-on the index opens at spider open)."""
        get_addon = getattr(self._crawler, "get_addon", None)
        addon = get_addon(NearDuplicateAddon) if get_addon is not None else None
        create = self.settings.create
        started = addon.take(url, create) if addon is not None else None
        return started or IndexProcess(url, create)

    # -- batching -------------------------------------------------------------
    def _content_of(self, adapter: Fields) -> tuple[str, str] | None:
        """The item's text (``text`` format), else its HTML (``html``), else None;
        :class:`OddItem` for a field the index cannot take (checked here, so that it
        never fails the batch it would join)."""
        text = adapter.get(self.settings.text_field)
        if text is not None and not isinstance(text, str):
            raise OddItem(
                f"{self.settings.text_field} is not a string",
                f"got {type(text).__name__} (bytes belong in {self.settings.html_field}, "
                "decoded by their declared charset)",
            )
        if text is not None and text.strip():
            return _unicode(text, self.settings.text_field), "text"
        html = adapter.get(self.settings.html_field)
        if isinstance(html, bytes):  # a response body: its declared charset decides
            from simhash_hbase.text.extract import decode

            html = decode(html, "html")
        if html is not None and not isinstance(html, str):
            raise OddItem(
                f"{self.settings.html_field} is not a string or bytes",
                f"got {type(html).__name__}",
            )
        if html is not None and html.strip():
            return _unicode(html, self.settings.html_field), "html"
        return None

    def _refuse_untaggable(self, item_class: type) -> None:
        """Tag mode: an item class that cannot carry the tag stops the crawl at its
        first item, said once; its items are dropped unchecked (never exported untagged,
        as if originals)."""
        if item_class not in self._untaggable:
            self._untaggable[item_class] = untaggable(item_class)
        why = self._untaggable[item_class]
        if why is not None:
            self._stop("shdb_untaggable_items", why)
            raise DropItem(f"not checked: {why}", log_level=DROP_LOG_LEVEL)

    def _say(self, said: Said) -> None:
        """An item without the fields read: warned once; the crawl stopped when none
        of the first SHDB_FIELD_CHECK_ITEMS items had them."""
        if said.warning is not None:
            self._log.warning("%s", said.warning)
        if said.stop is not None:
            self._stop("shdb_item_fields_missing", said.stop)

    def _warn_once(self, kind: str, doc_id: Any, detail: str) -> None:
        """An item passed through unchecked: logged for the first of its kind only
        (a crawl may hold thousands); ``shdb/skipped_invalid`` counts them all."""
        if kind not in self._warned:
            self._warned.add(kind)
            self._log.warning(
                "shdb: %.100r not checked: %s (items like it pass unchecked, counted in "
                "%sskipped_invalid and not logged again)",
                doc_id,
                detail,
                STATS,
            )

    def _submit(self, doc_id: str, raw: str, fmt: str) -> asyncio.Future[Answer]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Answer] = loop.create_future()
        self._last = loop.time()
        if not self._pending:
            self._since = self._last
        self._pending.append(_Pending(doc_id, raw, fmt, answer))
        self._unfed += 1
        if self._unfed >= FEED_ITEMS and self._indexer is not None:
            self._feed()
        if len(self._pending) >= self.settings.batch_size:
            self._start_flush()
        elif self._timer is None:
            if self._flushes:
                self._timer = loop.call_later(self.settings.flush_seconds, self._start_flush)
            else:
                self._linger()
        return answer

    def _feed(self) -> None:
        """Hand the items not yet fed to the index process, ahead of their batch; on
        the worker thread, so after any batch handed over before them. A hand-over
        that fails leaves the index process dead, which the batch's check reports."""
        unfed = self._pending[len(self._pending) - self._unfed :]
        self._unfed = 0
        for pending in unfed:
            pending.fed = True
        assert self._indexer is not None
        loop = asyncio.get_running_loop()
        feeding = loop.run_in_executor(self._worker, self._indexer.feed, [p.item for p in unfed])
        feeding.add_done_callback(lambda done: done.exception())

    def _linger(self) -> None:
        """While the index is free: the batch goes once its oldest item has waited
        SHDB_LINGER_SECONDS, or no item has come for a tenth of that (the crawl's last
        pages need not wait); until then this looks again when one of them is due."""
        loop = asyncio.get_running_loop()
        self._timer = None
        linger = self.settings.linger_seconds
        due = min(self._since + linger, self._last + linger / 10)
        if due <= loop.time():
            self._start_flush()
        else:
            self._timer = loop.call_at(due, self._linger)

    def _start_flush(self) -> None:
        """Group commit: a batch goes once the index is free (what arrived while it
        wrote the previous one) and has lingered (above), else at SHDB_BATCH_SIZE items
        or SHDB_FLUSH_SECONDS. Batches then grow with the load; no item waits on the
        long timer while the index process idles (the last pages of a crawl waited
        SHDB_FLUSH_SECONDS for it); and the linger keeps batches from shrinking to a
        few items when the index keeps up (a batch's check costs the index process
        about 2 ms, what twenty items' lookups cost). The linger is short: an item that
        waits keeps its response and Scrapy's work on it alive, which the garbage
        collector then rescans (held 0.2 s, five times the objects of a crawl without
        the pipeline; 0.05 s, 1.4 times)."""
        task = asyncio.ensure_future(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Future[Any]) -> None:
        self._flushes.discard(task)
        if self._pending and not self._flushes and self._failed is None:
            if self._timer is not None:
                self._timer.cancel()
            self._linger()

    async def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending, self._unfed = self._pending, [], 0
        if not batch:
            return
        if self._failed is not None:  # items that came while the failing batch was retried
            self._fail(batch, StoreError(self._failed))
            return
        try:
            results = await self._run(self._write_with_retries, batch)
        except ShdbError as exc:
            self._fail(batch, exc)
            return
        self._count(results)
        for pending, matches in zip(batch, results):
            pending.answer.set_result(matches)

    def _count(self, results: Sequence[Answer]) -> None:
        """A batch's counters, added once a batch rather than an item at a time."""
        checked = [m for m in results if isinstance(m, Matches)]
        near = sum(1 for m in checked if m)
        refused = sum(isinstance(m, tuple) for m in results)
        counts = {
            "batches": 1,
            "checked": len(checked),
            "skipped_unusable": len(results) - len(checked) - refused,
            "skipped_invalid": refused,
            "near_duplicates": near,
            "dropped": near if self.settings.action == "drop" else 0,
        }
        for name, n in counts.items():
            if n:
                self._stats.inc_value(f"{STATS}{name}", n)

    def _write_with_retries(self, batch: Sequence[_Pending]) -> list[Answer]:
        """On the worker thread: check and add one batch in arrival order, retrying a
        failing store. An item with no usable terms gets None, one the index refuses
        a :data:`Refusal`; neither is indexed, and the others are."""
        if self._indexer is None:  # the service extracts and fingerprints itself
            return self._send_texts(batch)
        fed = sum(p.fed for p in batch)  # the first ones
        check = partial(
            self._indexer.call,
            "check_batch",
            next(self._batches),
            fed,
            [p.item for p in batch[fed:]],
            self.settings.limit,
            self.settings.similarity,
            self.settings.within,
        )
        return self._retrying(check)

    def _send_texts(self, batch: Sequence[_Pending]) -> list[Answer]:
        """Runs of one format (text or HTML), one request each. The service writes
        nothing of a request holding an item it refuses (:class:`BatchRefused`), so
        the others are sent again without it and get their true answers."""
        assert self._index is not None
        within = self.settings.within  # counted back from this batch
        index = self._index if within is None else self._index.within(Window.last(within))
        results: list[Answer] = []
        for fmt, run in groupby(batch, key=lambda p: p.fmt):
            send = partial(index.check_and_add_texts, fmt=fmt, limit=self.settings.limit)
            answers: dict[int, Answer] = {}
            items = dict(enumerate((p.doc_id, p.raw) for p in run))
            while items:
                at = list(items)
                try:
                    found = self._retrying(partial(send, [items[n] for n in at]))
                except BatchRefused as exc:
                    for j, error in exc.refused.items():
                        answers[at[j]] = _refusal(error)
                        del items[at[j]]
                    continue
                answers.update(zip(at, found))
                break
            results += [answers[n] for n in sorted(answers)]
        return results

    def _retrying(self, write: Callable[[], list[Any]]) -> list[Any]:
        for attempt in range(self.settings.retries + 1):
            try:
                return write()
            except StoreError as exc:
                if attempt == self.settings.retries:
                    raise
                self._log.warning("shdb: store error (%s), retry %d", exc, attempt + 1)
                time.sleep(min(0.2 * 2**attempt, 5.0))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _fail(self, batch: Sequence[_Pending], exc: ShdbError) -> None:
        """A store that keeps failing stops the crawl; the batch's items are errors.
        The engine's close calls :meth:`close_spider`, which must not wait for it."""
        self._stats.inc_value(f"{STATS}errors", len(batch))
        for pending in batch:
            pending.answer.set_exception(DropItem(f"not indexed: {exc}"))
        self._stop("shdb_store_error", f"{exc} ({len(batch)} items not indexed)")

    def _stop(self, reason: str, why: str) -> None:
        """Stop the crawl (``finish_reason`` ``reason``) once, saying why as an ERROR;
        the items that come after are dropped unchecked. The engine's close calls
        :meth:`close_spider`, which must not wait for it."""
        if self._closing is not None:
            return
        self._failed = why
        self._log.error("shdb: stopping the crawl: %s", why)
        self._closing = asyncio.ensure_future(
            self._crawler.engine.close_spider_async(reason=reason)
        )

    def _tagged(self, adapter: Fields, item: Any, matches: Matches) -> Any:
        """``near_duplicates`` on the item: a scrapy.Item or dataclass must declare it."""
        adapter[TAG_FIELD] = [
            {"id": m.doc_id, "distance": m.distance, "similarity": m.similarity} for m in matches
        ]
        return item

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)


PIPELINE = f"{__name__}.NearDuplicatePipeline"


def _quietly_started(url: str, create: bool) -> IndexProcess | None:
    """An index process for ``url``, or None: its errors wait for the pipeline's
    open, which names SHDB_INDEX and the fix."""
    try:
        return IndexProcess(url, create)
    except ShdbError:
        return None


class NearDuplicateAddon:
    """A Scrapy add-on: ``ADDONS = {"simhash_hbase.integrations.scrapy.NearDuplicateAddon":
    0}`` enables the pipeline (``ITEM_PIPELINES``, order 300) and starts its index
    process as the ``CrawlerProcess`` (or runner) starts, before the crawler exists
    (``update_pre_crawler_settings``). The index then opens (its imports, the store)
    while Scrapy builds its crawler, extensions and middlewares, instead of holding
    the crawl at spider open (about 0.4 s a crawl here)."""

    #: Processes started with the runner's settings, by URL, until a crawler's add-on
    #: takes the one for its own SHDB_INDEX (the others are then closed).
    _early: ClassVar[dict[str, IndexProcess]] = {}

    def __init__(self, crawler: Any) -> None:
        self._started: IndexProcess | None = None
        crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Any) -> NearDuplicateAddon:
        return cls(crawler)

    @classmethod
    def update_pre_crawler_settings(cls, settings: Any) -> None:
        url = _local_index(settings)
        if url is not None and url not in cls._early:
            started = _quietly_started(url, settings.getbool("SHDB_CREATE"))
            if started is not None:
                cls._early[url] = started

    def update_settings(self, settings: Any) -> None:
        settings["ITEM_PIPELINES"].setdefault(PIPELINE, 300)
        url = _local_index(settings)  # the crawler's: a spider's settings may name another
        early, NearDuplicateAddon._early = NearDuplicateAddon._early, {}
        self._started = early.pop(url, None) if url is not None else None
        for unused in early.values():
            unused.close()
        if url is not None and self._started is None:
            self._started = _quietly_started(url, settings.getbool("SHDB_CREATE"))

    def take(self, url: str, create: bool) -> IndexProcess | None:
        """The process started for ``url`` (opening or creating it as asked), handed
        over once."""
        started, self._started = self._started, None
        if started is not None and (started.url, started.create) != (url, create):
            started.close()
            return None
        return started

    def _engine_stopped(self) -> None:
        """A process no pipeline took (the crawl failed before opening) is ended."""
        if self._started is not None:
            self._started.close()
            self._started = None


Fields = MutableMapping[str, Any]  # a dict item, or itemadapter's view of another kind


def _fields(item: Any) -> Fields:
    """The item's fields: a dict item itself; any other kind (``scrapy.Item``,
    dataclass, attrs, pydantic) through itemadapter, imported on the first such
    item. A crawl of dict items then never imports it: itemadapter imports pydantic
    where it is installed, ~50 ms of CPU in the crawl's start-up (Scrapy imports
    itemadapter only to export items)."""
    if isinstance(item, dict):
        return item
    from itemadapter import ItemAdapter

    return ItemAdapter(item)


def _similarity_setting(raw: Any) -> float | None:
    """SHDB_SIMILARITY: a number in (0, 1] (a string from the command line too)."""
    if raw is None:
        return None
    value = raw
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):  # not a number: check_similarity says so
            value = float(raw)
    return check_similarity(value, "SHDB_SIMILARITY")


def _local_index(settings: Any) -> str | None:
    """SHDB_INDEX when it names an index this crawl's own process opens (not a service)."""
    url = settings.get("SHDB_INDEX")
    return None if not url or _is_service(str(url)) else str(url)


def _is_service(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def _check_id(doc_id: Any) -> None:
    """:class:`OddItem` unless the index can hold ``doc_id`` as an id (docs/SPEC.md)."""
    if not isinstance(doc_id, str):
        raise OddItem("id is not a string", f"got {type(doc_id).__name__} {doc_id!r:.40}")
    _unicode(doc_id, "id")
    if len(doc_id) > _SHORT_ID:  # the index's own rule, and its message
        from simhash_hbase.layout.codec import encode_doc_id

        try:
            encode_doc_id(doc_id)
        except InvalidInput as exc:
            raise OddItem("id too long", str(exc)) from None


def _unicode(value: str, field: str) -> str:
    """``value`` unless it holds a lone surrogate (not a character: the index refuses
    it); the check is one pass of C, nothing for ASCII."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise OddItem(
                f"{field} holds a lone surrogate",
                f"{value[exc.start]!r} at character {exc.start} is not Unicode text",
            ) from None
    return value


def _refusal(error: ShdbError) -> Answer:
    """A refused item's answer from the service: None for no usable terms, as the
    index process answers; else a :data:`Refusal`."""
    from simhash_hbase.index.remote import RemoteError  # service crawls only

    if isinstance(error, RemoteError):
        return None if error.code == "no_terms" else (error.code, str(error))
    return type(error).__name__, str(error)


def _count(matches: Matches) -> str:
    return f"{matches.total}" if matches.total_exact else f">={matches.total}"


def _similarity(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
