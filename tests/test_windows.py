"""Windows are exact: every answer of an index in a time window (queries, check-and-add
new/dup, ingest's report) equals brute force over the documents inside the window, on
the embedded store and on HBase (issue 40: "Windows are exact")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simhash_hbase import Document, SimhashIndex
from simhash_hbase.layout.window import Window
from simhash_hbase.records import Matches, now_ms
from tests.conftest import HBASE_APIS, fresh_hbase_url

K = 3
DAY = 86_400_000
NOW = now_ms()
BASES = [0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x0F0F0F0F0F0F0F0F]

#: A document's time: whole days around now (None: stored before times).
times = st.one_of(st.none(), st.integers(-40, 3).map(lambda d: NOW + d * DAY))
#: A window's bounds fall between days (so "now" is inside or outside for the whole run).
bound = st.one_of(st.none(), st.integers(-40, 3).map(lambda d: NOW + d * DAY - DAY // 2))
windows = st.tuples(bound, bound).filter(lambda w: None in w or w[0] < w[1])
#: (id number, base, bits flipped, time)
doc = st.tuples(
    st.integers(0, 5),
    st.sampled_from(BASES),
    st.lists(st.integers(0, 63), max_size=4, unique=True),
    times,
)
Held = dict[str, tuple[int, int | None]]


def _doc(n: int, base: int, flips: list[int], time: int | None) -> Document:
    fp = base
    for bit in flips:
        fp ^= 1 << bit
    return Document(f"doc-{n}", fp, time=time)


@pytest.fixture(
    params=["embedded", *(pytest.param(api, marks=pytest.mark.hbase) for api in HBASE_APIS)]
)
def fresh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], AbstractContextManager[str]]:
    """A maker of empty index URLs (one per example) on each store."""

    @contextmanager
    def make() -> Iterator[str]:
        if request.param == "embedded":
            yield str(tmp_path_factory.mktemp("win") / "index")
        else:
            with fresh_hbase_url(request.param) as url:
                yield url

    return make


def _held(index: SimhashIndex, docs: list[Document]) -> Held:
    index.add_documents(docs)
    return {d.doc_id: (d.fingerprint, d.time) for d in docs}


def _near(held: Held, fp: int, window: Window, skip: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    return sorted(
        i
        for i, (f, t) in held.items()
        if i not in skip and window.holds(t) and (f ^ fp).bit_count() <= K
    )


EXAMPLES = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@EXAMPLES
@given(held=st.lists(doc, max_size=10), asked=st.lists(doc, max_size=6), bounds=windows)
@example(  # a hot row whose first cells are outside the window: it is read whole
    held=[(0, BASES[0], [], NOW - 9 * DAY), (1, BASES[0], [], None), (2, BASES[0], [], NOW)],
    asked=[(0, BASES[0], [], None)],
    bounds=(NOW - 5 * DAY - DAY // 2, None),
)
def test_queries_are_brute_force_in_the_window(
    fresh: Callable[[], AbstractContextManager[str]],
    held: list[tuple[int, int, list[int], int | None]],
    asked: list[tuple[int, int, list[int], int | None]],
    bounds: tuple[int | None, int | None],
) -> None:
    window = Window(*bounds)
    with fresh() as url, SimhashIndex.open(url) as index:
        docs = _held(index, [_doc(*d) for d in held])
        fps = [_doc(*d).fingerprint for d in asked]
        found = index.within(window).query_fingerprints(fps, K, limit=None)
        assert [sorted(m.doc_id for m in r) for r in found] == [
            _near(docs, fp, window) for fp in fps
        ]
        assert [r.total for r in found] == [len(_near(docs, fp, window)) for fp in fps]
        assert all(window.holds(m.time) for r in found for m in r)
        for fp, top in zip(fps, index.within(window).query_fingerprints(fps, K, limit=2)):
            want = sorted(((docs[i][0] ^ fp).bit_count(), i) for i in _near(docs, fp, window))
            assert [(m.distance, m.doc_id) for m in top] == want[:2]
            assert top.total == len(want) and top.total_exact


@EXAMPLES
@given(
    held=st.lists(doc, max_size=8),
    calls=st.lists(st.lists(st.tuples(doc, st.booleans()), max_size=5), max_size=2),
    bounds=windows,
)
@example(  # the window ended yesterday: the batch's own copies are outside it too
    held=[],
    calls=[[((0, BASES[0], [], NOW), False), ((1, BASES[0], [1], NOW), False)]],
    bounds=(None, NOW - DAY // 2),
)
@example(  # the only copy is older than the window: new, and stored
    held=[(0, BASES[0], [], NOW - 9 * DAY), (1, BASES[0], [2], None)],
    calls=[[((2, BASES[0], [1], NOW), False)]],
    bounds=(NOW - 5 * DAY - DAY // 2, None),
)
def test_check_and_add_is_brute_force_in_the_window(
    fresh: Callable[[], AbstractContextManager[str]],
    held: list[tuple[int, int, list[int], int | None]],
    calls: list[list[tuple[tuple[int, int, list[int], int | None], bool]]],
    bounds: tuple[int | None, int | None],
) -> None:
    """A text whose only copies are outside the window is new (and stored); the
    documents of the batch itself are "now"."""
    window = Window(*bounds)
    with fresh() as url, SimhashIndex.open(url) as index:
        state = _held(index, [_doc(*d) for d in held])
        now_inside = window.holds(now_ms())
        answers, expected = [], []
        for call in calls:
            docs = [_doc(*d) for d, _ in call]
            found = index.within(window).check_and_add(
                docs, K, always=[a for _, a in call], limit=None
            )
            answers += [(sorted(m.doc_id for m in r), r.total) for r in found]
            before, batch = dict(state), dict[str, int]()
            for d, (_, always) in zip(docs, call):
                near = _near(before, d.fingerprint, window, set(batch))
                if now_inside:
                    near = sorted(
                        near
                        + _near({i: (f, NOW) for i, f in batch.items()}, d.fingerprint, Window())
                    )
                expected.append((near, len(near)))
                if always or not near:
                    batch[d.doc_id] = d.fingerprint
                    state[d.doc_id] = (d.fingerprint, d.time)
        assert answers == expected
        assert {d.doc_id: (d.fingerprint, d.time) for d in index.documents()} == state


@EXAMPLES
@given(
    held=st.lists(doc, max_size=8),
    batch=st.lists(doc, max_size=6, unique_by=lambda d: d[0]),
    bounds=windows,
)
@example(  # re-added unchanged, held outside the window: no report, and "now" for the next
    held=[(0, BASES[0], [], NOW - 30 * DAY)],
    batch=[(0, BASES[0], [], NOW), (1, BASES[0], [2], NOW)],
    bounds=(NOW - 5 * DAY - DAY // 2, None),
)
@example(  # re-added unchanged, held outside the window, a copy inside it: still no report
    held=[(0, BASES[0], [], NOW - 30 * DAY), (1, BASES[0], [3], NOW)],
    batch=[(0, BASES[0], [], NOW)],
    bounds=(NOW - 5 * DAY - DAY // 2, None),
)
def test_ingest_reports_are_brute_force_in_the_window(
    fresh: Callable[[], AbstractContextManager[str]],
    held: list[tuple[int, int, list[int], int | None]],
    batch: list[tuple[int, int, list[int], int | None]],
    bounds: tuple[int | None, int | None],
) -> None:
    """Ingest's lookups (``--report``): a new document's pairs with the held documents
    inside the window (its own older version aside) and the batch's earlier ones; a
    document re-added unchanged reports none, whatever the window."""
    window = Window(*bounds)
    with fresh() as url, SimhashIndex.open(url) as index:
        before = _held(index, [_doc(*d) for d in held])
        docs = [_doc(*d) for d in batch]
        found = index.within(window).add_documents(docs, find_k=K, limit=None)
        got = {
            lookup.doc_id: (sorted(m.doc_id for m in lookup.matches), lookup.matches.total)
            for lookup in found
        }
        expected, written = {}, dict[str, int]()
        for d in docs:
            if before.get(d.doc_id, (None,))[0] == d.fingerprint:
                written[d.doc_id] = d.fingerprint  # unchanged: no report, yet "now"
                continue
            near = _near(before, d.fingerprint, window, {d.doc_id, *written})
            if window.holds(now_ms()):
                near = sorted(
                    near + _near({i: (f, NOW) for i, f in written.items()}, d.fingerprint, Window())
                )
            if near:
                expected[d.doc_id] = (near, len(near))
            written[d.doc_id] = d.fingerprint
        assert got == expected


def test_no_window_is_every_document(tmp_path: Path) -> None:
    with SimhashIndex.open(str(tmp_path / "index")) as index:
        index.add_documents([Document("old", BASES[0], time=None)])
        assert index.within(None) is index and index.within(Window()) is index
        assert [m.doc_id for m in index.query_fingerprint(BASES[0])] == ["old"]
        assert index.within(Window(0, None)).query_fingerprint(BASES[0]).total == 0


TEXTS = [
    "今天股市大幅上涨，银行板块领涨，成交量创下年内新高。",
    "今天股市大幅上涨，银行板块领涨，成交量创下年内新高！",
    "今天股市大幅上涨，银行板块领涨，成交量创下了年内的新高。",
    "北京今天天气晴朗，市民纷纷走出家门到公园散步赏花。",
    "北京今天天气晴朗，市民纷纷走出家门到公园里散步赏花。",
    "SimHash is a locality sensitive hash used to find near duplicate web pages.",
]


@EXAMPLES
@given(stamps=st.lists(times, min_size=len(TEXTS), max_size=len(TEXTS)), bounds=windows)
def test_both_nets_in_a_window_answer_as_an_index_of_the_window(
    fresh: Callable[[], AbstractContextManager[str]],
    stamps: list[int | None],
    bounds: tuple[int | None, int | None],
) -> None:
    """Texts (the pigeonhole and the LSH bands, judged by their sketches): an index
    in a window answers every query as an index holding only the documents inside."""
    window = Window(*bounds)
    with (
        fresh() as url,
        fresh() as inside_url,
        SimhashIndex.open(url) as index,
        SimhashIndex.open(inside_url) as inside,
    ):
        for n, (text, t) in enumerate(zip(TEXTS, stamps)):
            index.add(f"t{n}", text)  # stamped "now": the strategy's time (or none) instead
            index.add_documents([dataclasses.replace(index.get(f"t{n}"), time=t)])  # type: ignore[type-var]
            if window.holds(t):
                inside.add(f"t{n}", text)

        def shown(found: list[Matches]) -> list[tuple[list[tuple[str, int, float | None]], int]]:
            return [([(m.doc_id, m.distance, m.similarity) for m in r], r.total) for r in found]

        windowed = index.within(window)
        every = shown(windowed.query_many(TEXTS, limit=None))
        assert every == shown(inside.query_many(TEXTS, limit=None))
        probed = shown([windowed.query(TEXTS[0], probes=2)])
        assert probed == shown([inside.query(TEXTS[0], probes=2)])


class _Requests:
    """A store proxy recording the reads a lookup sends."""

    READS = ("scan_prefixes_many", "scan_documents", "get_docs", "doc_fingerprints", "row_sizes")

    def __init__(self, store: object) -> None:
        self._store = store
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._store, name)
        if name not in self.READS:
            return attr

        def sent(*args: object, **kwargs: object) -> object:
            self.sent.append(name)
            return attr(*args, **kwargs)  # type: ignore[operator]

        return sent


def test_a_window_adds_no_round_trip(store_url: str) -> None:
    """The times come in the multi-get that reads the candidates' rows (or their times
    without a window): a lookup in a window sends no more requests than one without,
    however many candidates it has (60 copies, half of them outside)."""
    window = Window(NOW - 5 * DAY, None)
    with SimhashIndex.open(store_url) as index:
        index.add_documents(
            [Document(f"c{n}", BASES[0], time=NOW - (n % 2) * 9 * DAY) for n in range(60)]
        )
        for n, text in enumerate(TEXTS):
            index.add(f"t{n}", text)
        requests = _Requests(index._store)
        index._store = requests  # type: ignore[assignment]
        lookups = [
            lambda ix: ix.query_fingerprint(BASES[0], K),
            lambda ix: ix.query_fingerprints([BASES[0]] * 6, K),
            lambda ix: ix.query(TEXTS[0]),
            lambda ix: ix.query_many(TEXTS),
        ]
        for lookup in lookups:
            requests.sent.clear()
            plain = lookup(index)
            sent = list(requests.sent)
            requests.sent.clear()
            lookup(index.within(window))
            assert len(requests.sent) <= len(sent) and requests.sent.count("get_docs") <= 1, (
                sent,
                requests.sent,
            )
            assert plain is not None
        assert index.within(window).query_fingerprint(BASES[0], K, limit=None).total == 30
