"""Text -> 64-bit SimHash: jieba terms, TF-IDF weights, top-N, mmh3, signed bit sums.

Every parameter that changes the output is in :class:`FingerprintParams`, which is
written to the index manifest; an index refuses a fingerprinter that differs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cache, partial
from importlib import resources
from itertools import compress, filterfalse, repeat
from operator import itemgetter, mul
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhash_hbase import _native as native
from simhash_hbase.errors import EmptyDocument, InvalidInput, InvalidSetting
from simhash_hbase.fingerprint import opencc_cache, scripts, segment
from simhash_hbase.fingerprint.cache import cached
from simhash_hbase.fingerprint.idf import SparseIdf, sparse_idf
from simhash_hbase.fingerprint.memo import MAX_ENTRIES, Memo
from simhash_hbase.fingerprint.probes import probe_fingerprints
from simhash_hbase.fingerprint.weights import cap_weights, v2_count
from simhash_hbase.text.html import HTML_MODES
from simhash_hbase.version import dist_version

if TYPE_CHECKING:
    import numpy as np

# NumPy, mmh3 and multiprocessing are imported where they are used, so that the
# settings and defaults here cost a command line nothing (tests/test_lazy_imports.py).

DEFAULT_TOP_N = 16  # best recall at k=3 in docs/quality.md (89.0% vs 87.2% for 64)
DEFAULT_SEED = 0
DEFAULT_NGRAM = 2
FEATURES = ("words", "chars")
BUILTIN_IDF = "jieba"
CUSTOM_IDF = "custom"
MAX_TOP_N = 1 << 20
MAX_NGRAM = 64
_DIGEST = re.compile(r"[0-9a-f]{64}")
#: 1: the original recipe (kept bit for bit: indexes built with it answer as before).
#: 2: NFKC-normalised text, no pure numbers or 1-character ASCII tokens (see
#: :func:`v2_keeps`), weights ``count ** 1.75`` (x IDF) capped at a fifth of the top-N's
#: total (:mod:`~simhash_hbase.fingerprint.weights`); docs/quality.md's evaluation chose it.
#: 3: version 2 with every script cut into words (:mod:`~simhash_hbase.fingerprint.scripts`)
#: and the stop words of other languages: a text of Han and ASCII alone keeps version 2's.
#: 4: version 3 with no term above 0.08 of the *capped* total where a top term holds
#: another script (:func:`~simhash_hbase.fingerprint.weights.fixed_cap`): a text of Han
#: and ASCII alone keeps version 3's (and 2's).
FINGERPRINT_VERSIONS = (1, 2, 3, 4)
#: New indexes take version 4 (docs/quality.md); older indexes keep answering as before.
DEFAULT_VERSION = 4
#: Traditional -> Simplified folding before tokenizing (v2 only; OpenCC): "t2s" by
#: character (OpenCC's t2s); "tw2sp" (the v2 default) by phrase: a line that holds
#: Traditional characters goes through OpenCC's tw2sp (Taiwan phrases and variants:
#: 軟體 -> 软件, 檔案 -> 文件), Simplified lines stay as they are (tw2sp would turn a
#: mainland 文件 into 文档). See :func:`_folder`.
FOLDS = ("none", "t2s", "tw2sp")
DEFAULT_FOLD = "tw2sp"
#: Which tokens are terms. "word" (v1, and v2 indexes built before this rule): any
#: token with a word character (``\w``, ``_`` included). "letter" (new v2 indexes):
#: a token with a letter or digit (Unicode L* or N*): no term is made only of
#: punctuation or symbols (P*, S*: ``_``, ``^_^``, ``++``, emoji).
TERM_RULES = ("word", "letter")
_HAS_WORD_CHAR = re.compile(r"\w").search
_WORD_CHARS = re.compile(r"\w+")
_WEIGHT_THEN_TERM = itemgetter(1, 0)
#: What :func:`_term_of` gives a token that makes no term (terms are never empty).
_DROPPED = ""


@dataclass(frozen=True)
class IdfTable:
    """Term -> IDF, plus the median used for unknown terms (the design source's rule).

    A table is known by the SHA-256 of its bytes, never by a file name: two
    copies of one table are the same table.
    """

    digest: str
    idf: dict[str, float] = field(repr=False, compare=False)
    median: float
    raw: bytes = field(repr=False, compare=False)

    def resolve(self, terms: Iterable[str]) -> None:
        """Nothing to do: every term is loaded (:class:`SparseIdf` loads on demand)."""


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _parse_idf(raw: bytes, source: str) -> dict[str, float]:
    table: dict[str, float] = {}
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        try:
            parts = line.decode("utf-8-sig" if lineno == 1 else "utf-8").split()
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"{source}:{lineno}: invalid UTF-8 at byte {exc.start} of the line; "
                "an IDF table is UTF-8 text"
            ) from None
        if not parts:
            continue
        try:
            term, value = parts[0], float(parts[1])
        except (IndexError, ValueError):
            raise InvalidInput(
                f"{source}:{lineno}: expected 'term idf' per line, got {' '.join(parts)[:60]!r}"
            ) from None
        if not math.isfinite(value):
            raise InvalidInput(f"{source}:{lineno}: the IDF of {term!r} is not a finite number")
        table[term] = value
    if not table:
        raise InvalidInput(f"{source}: the IDF table is empty")
    return table


def _jieba_idf_path() -> Path:
    spec = importlib.util.find_spec("jieba")  # its location, without importing it (~0.2 s)
    assert spec is not None and spec.submodule_search_locations, "jieba is a dependency"
    return Path(spec.submodule_search_locations[0]) / "analyse" / "idf.txt"


def _table(raw: bytes, source: str) -> IdfTable:
    digest = _sha256(raw)

    def parse() -> tuple[dict[str, float], float]:
        idf = _parse_idf(raw, source)
        values = sorted(idf.values())
        return idf, values[len(values) // 2]

    # Parsing jieba's table costs ~0.25 s CPU per process; the per-user cache ~0.1 s.
    idf, median = cached(f"idf-{digest}.marshal", parse)
    return IdfTable(digest=digest, idf=idf, median=median, raw=raw)


_custom_tables: dict[str, IdfTable] = {}  # by digest; worker processes inherit it (fork)


def register_idf(raw: bytes, source: str = "IDF table") -> IdfTable:
    """Parse a custom table ('term idf' lines) and make it known by its digest."""
    table = _table(raw, source)
    _custom_tables.setdefault(table.digest, table)
    return table


def load_idf_file(path: str) -> IdfTable:
    """:func:`register_idf` of a file."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read the IDF table {path}: {exc.strerror}") from exc
    return register_idf(raw, path)


@cache
def builtin_idf_digest() -> str:
    """SHA-256 of jieba's bundled table (what a manifest records), without parsing it.

    Every open index checks it, and hashing the 6 MB costs ~40 ms, a tenth of a
    one-shot ``shdb query``: it is cached per installed file (device, inode, size,
    modification time), so a reinstalled jieba is hashed again.
    """
    path = _jieba_idf_path()
    st = path.stat()
    key = f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}"
    digest: str = cached(f"idf-digest-{key}.marshal", lambda: _sha256(path.read_bytes()))
    return digest


@cache
def _builtin_sparse() -> SparseIdf:
    def table() -> tuple[dict[str, float], float]:
        full = builtin_idf()
        return full.idf, full.median

    return sparse_idf(builtin_idf_digest(), table)


@cache
def builtin_idf() -> IdfTable:
    """jieba's bundled table."""
    source = _jieba_idf_path()
    return _table(source.read_bytes(), str(source))


def idf_table(digest: str | None) -> IdfTable:
    """The table a :class:`FingerprintParams` names (None: jieba's)."""
    if digest is None:
        return builtin_idf()
    try:
        return _custom_tables[digest]
    except KeyError:
        raise InvalidSetting(
            "idf", f"the IDF table {digest[:12]}... is not loaded (register it first)"
        ) from None


#: The stop words of each version (files of ``simhash_hbase/data``): version 3 (and 4) adds
#: those of other languages (words with a character outside ASCII: English and
#: Chinese terms stay as they were), and records the Latin-script languages' ASCII
#: ones that :mod:`~simhash_hbase.fingerprint.scripts` drops in texts of other scripts.
_STOPWORD_FILES: dict[int, tuple[str, ...]] = {1: ("stopwords.txt",), 2: ("stopwords.txt",)}
_STOPWORD_FILES[3] = _STOPWORD_FILES[4] = (*_STOPWORD_FILES[2], "stopwords-scripts.txt")
_RECORDED_FILES = {3: (scripts.LATIN_STOPWORDS,), 4: (scripts.LATIN_STOPWORDS,)}


@cache
def _stopwords(version: int = 1) -> tuple[frozenset[str], str]:
    """The version's stop words and the SHA-256 of their file (version 3: of the
    digests of all its files, joined by spaces)."""
    data = resources.files("simhash_hbase").joinpath("data")
    raws = [data.joinpath(name).read_bytes() for name in _STOPWORD_FILES[version]]
    words = frozenset(w for raw in raws for w in raw.decode("utf-8").split())
    raws += [data.joinpath(name).read_bytes() for name in _RECORDED_FILES.get(version, ())]
    digests = [_sha256(raw) for raw in raws]
    return words, digests[0] if len(digests) == 1 else _sha256(" ".join(digests).encode())


@dataclass(frozen=True)
class FingerprintParams:
    """What the manifest records; two fingerprints are comparable iff these match.

    Invalid values are refused here, before anything is written with them.
    """

    top_n: int = DEFAULT_TOP_N
    seed: int = DEFAULT_SEED
    #: SHA-256 of a custom IDF table (see :func:`register_idf`); None: jieba's own.
    idf: str | None = None
    #: "words": jieba terms weighted by TF-IDF; "chars": character n-grams weighted
    #: by count (measured worse than words on short texts too: docs/quality.md).
    features: str = "words"
    ngram: int = DEFAULT_NGRAM
    tokenizer: str = "jieba"
    hash: str = "mmh3.hash64[0]"
    bits: int = 64
    #: The text normalisation and term filter recipe (FINGERPRINT_VERSIONS).
    version: int = DEFAULT_VERSION
    #: Traditional -> Simplified folding (:data:`FOLDS`; version 2 only). None: the
    #: version's default ("tw2sp" for 2, "none" for 1).
    fold: str = None  # type: ignore[assignment]
    #: Which tokens are terms (:data:`TERM_RULES`). None: the version's default.
    terms: str = None  # type: ignore[assignment]
    #: How an HTML page becomes text: "main" (its article) or "raw" (all visible text).
    html: str = "main"

    def __post_init__(self) -> None:
        _check_int("top_n", self.top_n, 1, MAX_TOP_N)
        _check_int("seed", self.seed, 0, (1 << 32) - 1)
        _check_int("ngram", self.ngram, 1, MAX_NGRAM)
        _check_int("bits", self.bits, 64, 64)
        if self.features not in FEATURES:
            raise InvalidSetting(
                "features", f"unknown features {self.features!r}; one of: {', '.join(FEATURES)}"
            )
        if self.idf is not None and not _DIGEST.fullmatch(self.idf):
            raise InvalidSetting("idf", f"{self.idf!r} is not a SHA-256 digest of an IDF table")
        if self.fold is None:
            object.__setattr__(self, "fold", "none" if self.version == 1 else DEFAULT_FOLD)
        if self.terms is None:
            object.__setattr__(self, "terms", "word" if self.version == 1 else "letter")
        _check_version(self.version, self.fold, self.terms)
        if self.html not in HTML_MODES:
            modes = ", ".join(HTML_MODES)
            raise InvalidSetting("html", f"unknown HTML mode {self.html!r}; one of: {modes}")

    @classmethod
    def with_idf_file(cls, path: str, **settings: Any) -> FingerprintParams:
        """Params using the custom IDF table in ``path`` (loaded and registered)."""
        return cls(idf=load_idf_file(path).digest, **settings)

    def to_manifest(self) -> dict[str, Any]:
        """The manifest entry: every field, plus digests of what the code ships
        (tokenizer version, jieba's IDF table, the stop words), which must match too."""
        entry = asdict(self)
        if self.version == 1:  # v1 manifests predate these keys: absent means v1
            del entry["version"], entry["fold"], entry["terms"]
            if self.html == "main":
                del entry["html"]
        elif self.fold != "none":
            entry["fold_converter"] = _fold_converter_version(self.fold)
        entry.update(
            idf=BUILTIN_IDF if self.idf is None else CUSTOM_IDF,
            idf_digest=builtin_idf_digest() if self.idf is None else self.idf,
            tokenizer_version=segment.family_version(),
            stopwords_digest=_stopwords(self.version)[1],
        )
        return entry

    @classmethod
    def from_manifest(cls, entry: dict[str, Any]) -> FingerprintParams:
        """Inverse of :meth:`to_manifest` (also reads the format's first spelling,
        where the table was named by ``idf_name``)."""
        kind = entry.get("idf", entry.get("idf_name"))
        names = {f.name for f in fields(cls)} - {"idf"}
        settings = {k: v for k, v in entry.items() if k in names}
        settings.setdefault("version", 1)  # written before versions existed
        if settings["version"] == 2:
            settings.setdefault("fold", "none")  # written before folding was the default
            settings.setdefault("terms", "word")  # written before the "letter" rule
        return cls(idf=None if kind == BUILTIN_IDF else entry["idf_digest"], **settings)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidSetting(name, f"{name} must be an integer in {low}..{high}, got {value!r}")


class Fingerprinter:
    """Turns texts into fingerprints; cheap to call once built (tables are cached)."""

    def __init__(self, params: FingerprintParams | None = None) -> None:
        self.params = params or FingerprintParams()
        self._fold = _folder(self.params.fold)
        # jieba's table is read term by term (see idf_lookup): a fresh process starts fast.
        self._idf: IdfTable | SparseIdf = (
            _builtin_sparse() if self.params.idf is None else idf_table(self.params.idf)
        )
        cut = segment.segmenter()
        self._cut = scripts.script_cut(cut) if self.params.version >= 3 else cut
        self._term_of = _term_of(self.params.version)
        compiled = native.module()
        ours = compiled is not None and self.params.features == "words"
        self._native = _native_terms(self.params) if ours and self._recipe_is_ours() else None
        self._sign_rows_c = None if compiled is None else compiled.sign_rows

    def _recipe_is_ours(self) -> bool:
        """Whether the terms are this class's own: a subclass that changes how they are
        counted or filtered keeps its methods (the C path would bypass them)."""
        cls = type(self)
        return cls.term_counts is Fingerprinter.term_counts and (
            cls.features is Fingerprinter.features
        )

    def term_counts(self, text: str) -> Counter[str]:
        """Usable terms and their counts: no whitespace, punctuation or stop words."""
        if self.params.features == "chars":
            chars = "".join(_WORD_CHARS.findall(text.lower()))
            n = self.params.ngram
            starts = range(max(len(chars) - n + 1, 0))
            return Counter(map(chars.__getitem__, map(slice, starts, range(n, len(chars) + 1))))
        counts = Counter(map(self._term_of.__getitem__, self._cut(text)))
        del counts[_DROPPED]
        return counts

    def features(self, text: str) -> Counter[str]:
        """The terms a fingerprint is made of: :meth:`term_counts` of the normalised
        text, filtered by the version's rule (v1: the terms as they are)."""
        if self.params.version == 1:
            return self.term_counts(text)
        counts = self.term_counts(normalise(text, self._fold))
        kept = Counter(counts)  # a copy: a subclass may hand out the same counts again
        for term in list(filterfalse(_V2_KEEPS.__getitem__, counts)):
            del kept[term]
        if self.params.terms == "letter":
            for term in list(filterfalse(_HAS_LETTER.__getitem__, kept)):
                del kept[term]
        return kept

    def weighted_terms(self, text: str) -> list[tuple[str, float]]:
        """The top-N (term, weight) pairs, heaviest first, ties broken by term.

        Words weigh count x IDF (the table's median IDF for unknown words);
        character n-grams weigh their count. Version 2 reshapes both
        (:mod:`~simhash_hbase.fingerprint.weights`).
        """
        v2 = self.params.version >= 2
        if self._native is not None:  # the same pairs in C (native.py)
            tokens = self._cut(normalise(text, self._fold) if v2 else text)
            top = self._native.top(tokens, self.params.top_n)
            return cap_weights(self.params.version, top) if v2 else top
        counts = self.features(text)
        if not counts:
            return []
        terms = list(counts)
        factors = map(_V2_COUNT.__getitem__, counts.values()) if v2 else counts.values()
        if self.params.features == "chars":
            weights = list(map(float, factors))
        else:
            self._idf.resolve(terms)
            idf = map(self._idf.idf.get, terms, repeat(self._idf.median))
            weights = list(map(mul, factors, idf))
            if min(weights) <= 0.0:
                # A term in every document of a custom IDF table weighs 0: it carries no
                # signal, and texts made only of such terms must not share fingerprint 0.
                positive = list(map((0.0).__lt__, weights))
                terms, weights = list(compress(terms, positive)), list(compress(weights, positive))
        top = _heaviest(terms, weights, self.params.top_n)
        return cap_weights(self.params.version, top) if v2 else top

    def bit_sums(self, text: str) -> np.ndarray:
        """The 64 signed, weighted sums whose signs are the fingerprint (MSB first)."""
        terms = self.weighted_terms(text)
        if not terms:
            raise EmptyDocument(
                "the text has no usable terms (it is empty, or only whitespace, "
                "punctuation or stop words); it cannot be fingerprinted"
            )
        import numpy as np

        names = [name for name, _ in terms]
        if self._native is None or self._sign_rows_c is None:
            rows = _sign_rows(names, self.params.seed)
        else:  # the same rows from C (native.py)
            raw = self._sign_rows_c(names, self.params.seed)
            rows = np.frombuffer(raw, dtype=np.float64).reshape(len(names), 64)
        # The same product of ±1.0 signs as ever: the float sums (margins) stay bit for bit.
        weights = np.array([weight for _, weight in terms], dtype=np.float64)
        sums: np.ndarray = weights @ rows
        return sums

    def fingerprint(self, text: str) -> int:
        return _bits_of(self.bit_sums(text))

    def fingerprint_margins(self, text: str) -> tuple[int, np.ndarray]:
        """The fingerprint and each bit's margin: the |signed sum| that an edit must
        overcome to flip it. ``margins[i]`` belongs to bit ``i`` (value ``1 << i``);
        the smallest margins are the volatile bits that multi-probe flips."""
        sums = self.bit_sums(text)
        return _bits_of(sums), abs(sums[::-1])

    def fingerprint_or_error(self, text: str) -> int | EmptyDocument:
        try:
            return self.fingerprint(text)
        except EmptyDocument as exc:
            return exc

    def probes(self, text: str, probes: int) -> list[int]:
        """The fingerprint followed by its ``probes`` flipped copies, in probe order
        (:mod:`simhash_hbase.fingerprint.probes`): what a probed lookup searches."""
        return probe_fingerprints(*self.fingerprint_margins(text), probes)

    def probes_or_error(self, text: str, probes: int) -> list[int] | EmptyDocument:
        try:
            return self.probes(text, probes)
        except EmptyDocument as exc:
            return exc

    def map(
        self, texts: Iterable[Sequence[str]], workers: int = 1
    ) -> Iterator[list[int | EmptyDocument]]:
        """Fingerprint chunks of texts, in order, across ``workers`` processes."""
        return self._map(texts, workers, None)

    def map_probes(
        self, texts: Iterable[Sequence[str]], probes: int, workers: int = 1
    ) -> Iterator[list[list[int] | EmptyDocument]]:
        """Like :meth:`map`, giving each text's probe list (see :meth:`probes`)."""
        return self._map(texts, workers, probes)

    def _map(
        self, texts: Iterable[Sequence[str]], workers: int, probes: int | None
    ) -> Iterator[list[Any]]:
        if workers <= 1:
            for chunk in texts:
                yield _chunk_of(self, chunk, probes)
            return
        # fork: children inherit the loaded dictionary and IDF table (no 1 s reload
        # each). A worker that dies is an error naming the text it held (workers.py).
        from simhash_hbase.fingerprint.workers import map_chunks

        if self.params.features == "words":
            segment.preload()
        yield from map_chunks(
            ((chunk, probes) for chunk in texts),
            workers,
            partial(_init_worker, self.params),
            _worker_chunk,
        )


_worker: Fingerprinter | None = None


def _init_worker(params: FingerprintParams) -> None:
    global _worker
    _worker = Fingerprinter(params)


def _chunk_of(fp: Fingerprinter, texts: Sequence[str], probes: int | None) -> list[Any]:
    if probes is None:
        return [fp.fingerprint_or_error(t) for t in texts]
    return [fp.probes_or_error(t, probes) for t in texts]


def _worker_chunk(texts: Sequence[str], probes: int | None) -> list[Any]:
    assert _worker is not None
    return _chunk_of(_worker, texts, probes)


def _sign_rows(names: list[str], seed: int) -> np.ndarray:
    """Each term's hash (``mmh3.hash64(term, seed)[0]``, of its UTF-8 bytes) as 64 signs,
    most significant bit first: +1.0 where the bit is set, -1.0 elsewhere. The bytes
    are hashed, not the str: mmh3 5.3.1 crashes on a str holding a lone surrogate,
    where encoding raises UnicodeEncodeError."""
    import mmh3
    import numpy as np

    hashes = b"".join(
        [mmh3.hash64(t.encode(), seed, signed=False)[0].to_bytes(8, "big") for t in names]
    )
    bits = np.unpackbits(np.frombuffer(hashes, dtype=np.uint8)).reshape(len(names), 64)
    rows: np.ndarray = _signs()[bits]
    return rows


@cache
def _signs() -> np.ndarray:
    """A hash bit (0 or 1) -> its sign in the sums."""
    import numpy as np

    return np.array([-1.0, 1.0])


def _bits_of(sums: np.ndarray) -> int:
    import numpy as np

    return int.from_bytes(np.packbits(sums > 0.0).tobytes(), "big")


_NUMBER = re.compile(r"[0-9][0-9.,:/_-]*")


def v2_keeps(term: str) -> bool:
    """v2's term filter: no pure numbers (``2024``, ``1.2.3``, ``08:30``) and no single
    ASCII characters (option letters, list markers). jieba's IDF table has no ASCII
    entries, so these got its median IDF, more than most Chinese words, and crowded
    the top-N while carrying no topic; a changed date or version flipped bits."""
    if len(term) == 1 and term.isascii():
        return False
    return _NUMBER.fullmatch(term) is None


def has_letter(term: str) -> bool:
    """The "letter" term rule: a letter or digit (Unicode L* or N*) in ``term``."""
    return any(unicodedata.category(c)[0] in "LN" for c in term)


def _native_terms(params: FingerprintParams) -> Any:
    """The C path's term table for ``params`` (words; the extension is built)."""
    return _terms_table(params.version, params.terms == "letter", params.idf)


@cache
def _terms_table(version: int, letter: bool, idf_digest: str | None) -> Any:
    """One table per recipe and process: its memory of tokens is shared."""
    compiled = native.module()
    assert compiled is not None, "called with the extension built"
    idf = _builtin_sparse() if idf_digest is None else idf_table(idf_digest)
    keys: Any = b""
    values: Any = b""
    width, table = 0, None
    if isinstance(idf, SparseIdf):
        keys, values, width = idf.arrays()
    else:
        table = idf.idf
    return compiled.Terms(
        _stopwords(version)[0],
        has_letter,
        table,
        keys,
        values,
        width,
        idf.median,
        version >= 2,
        letter,
        MAX_ENTRIES,
    )


_V2_KEEPS = Memo(v2_keeps)
_HAS_LETTER = Memo(has_letter)
_V2_COUNT = Memo(v2_count)


@cache
def _term_of(version: int = 1) -> Memo[str, str]:
    """token -> the term it counts as (stripped, lower-cased), or :data:`_DROPPED` for
    whitespace, punctuation and the version's stop words. One per process and version."""
    stop = _stopwords(version)[0]

    def term(token: str) -> str:
        term = token.strip().lower()
        keep = term and term not in stop and _HAS_WORD_CHAR(term)
        return term if keep else _DROPPED

    return Memo(term)


def _heaviest(terms: list[str], weights: list[float], n: int) -> list[tuple[str, float]]:
    """The ``n`` heaviest (term, weight) pairs, heaviest first, ties by the greater term:
    ``heapq.nlargest(n, pairs, key=(weight, term))`` (the keys are unique), with no
    Python call per term. Only terms as heavy as the n-th heaviest weight can be in it."""
    if len(weights) > n:
        floor = sorted(weights, reverse=True)[n - 1]
        heavy = list(map(floor.__le__, weights))
        terms, weights = list(compress(terms, heavy)), list(compress(weights, heavy))
    return sorted(zip(terms, weights), key=_WEIGHT_THEN_TERM, reverse=True)[:n]


def _unwiden_py(text: str) -> str:
    return text


#: Full-width ASCII, U+3000, U+00A0 and U+2026 replaced by their compatibility
#: decompositions, which leaves NFKC as it is, in C (``_native.unwiden``);
#: without the extension, nothing (NFKC does it).
_COMPILED = native.module()
_unwiden: Callable[[str], str] = _unwiden_py if _COMPILED is None else _COMPILED.unwiden


def normalise(text: str, fold: Callable[[str], str] | None = None) -> str:
    """v2's text normalisation: NFKC (full-width Latin and digits become ASCII words,
    ligatures and circled numbers their plain forms), then the optional folding."""
    if not unicodedata.is_normalized("NFKC", text):  # most text is: a quick check, no copy
        text = _unwiden(text)  # the same NFKC, reached sooner (Chinese punctuation)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
    return fold(text) if fold is not None else text


def _check_version(version: object, fold: object, terms: object = "word") -> None:
    if isinstance(version, bool) or version not in FINGERPRINT_VERSIONS:
        known = ", ".join(map(str, FINGERPRINT_VERSIONS))
        raise InvalidSetting("version", f"unknown fingerprint version {version!r}; known: {known}")
    if fold not in FOLDS:
        raise InvalidSetting("fold", f"unknown folding {fold!r}; one of: {', '.join(FOLDS)}")
    if fold != "none" and version == 1:
        raise InvalidSetting("fold", "Traditional -> Simplified folding needs version 2")
    if terms not in TERM_RULES:
        raise InvalidSetting(
            "terms", f"unknown term rule {terms!r}; one of: {', '.join(TERM_RULES)}"
        )
    if terms != "word" and version == 1:
        raise InvalidSetting("terms", "version 1's terms are its own (the 'word' rule)")


@cache
def _opencc() -> Any:
    try:
        import opencc
    except ImportError:
        raise InvalidSetting(
            "fold",
            "Traditional -> Simplified folding needs OpenCC, which is not installed "
            "(pip install opencc; it is a dependency of simhash-hbase): without it the "
            "fingerprints would differ from the index's",
        ) from None
    return opencc


def _folder(fold: str) -> Callable[[str], str] | None:
    """The folding ``fold`` (:data:`FOLDS`) as a function, or None for "none".

    "t2s": OpenCC's t2s, character by character (and its phrase table), which
    leaves Simplified text as it is. "tw2sp": a text without Traditional characters
    (t2s leaves it as it is) stays as it is; otherwise each line that holds them
    goes through OpenCC's tw2sp, which also converts Taiwan phrases and variants to
    mainland ones (軟體 -> 软件, 滑鼠 -> 鼠标). Applied to Simplified text, tw2sp
    would change mainland words (文件 -> 文档), so Simplified lines are never given to it.
    """
    if fold == "none":
        return None
    _opencc()  # the error that names the missing converter, if it is missing
    t2s = opencc_cache.converter("t2s")
    if fold == "t2s":
        return t2s

    def tw2sp() -> Callable[[str], str]:  # loaded for the first Traditional text only
        return opencc_cache.converter("tw2sp")

    def by_line(text: str) -> str:
        lines = text.split("\n")
        return "\n".join(tw2sp()(line) if t2s(line) != line else line for line in lines)

    suspects = _suspect_lines(opencc_cache.screen("t2s"))

    def by_phrase(text: str) -> str:
        """:func:`by_line`, with one OpenCC call per converter: no dictionary key or value
        holds a newline, so OpenCC converts newline-joined lines line by line
        (tests/test_fingerprint_v2.py), and the lines t2s changes are the Traditional ones.
        Which lines t2s leaves as they are, and which it surely changes, is mostly told
        by their characters (:func:`~simhash_hbase.fingerprint.opencc_cache.screen`):
        only the others are given to t2s."""
        maybe, sure = suspects(text)
        if not maybe:
            return text
        lines = text.split("\n")
        known = set(sure)
        unsure = [i for i in maybe if i not in known]
        simple = t2s("\n".join([lines[i] for i in unsure])).split("\n") if unsure else []
        if len(simple) != len(unsure):
            return by_line(text)  # never seen: a converter that joined or split lines
        changed = sorted([*sure, *(i for i, to in zip(unsure, simple) if lines[i] != to)])
        if not changed:
            return text
        converted = tw2sp()("\n".join([lines[i] for i in changed])).split("\n")
        if len(converted) != len(changed):
            return by_line(text)
        for i, line in zip(changed, converted):
            lines[i] = line
        return "\n".join(lines)

    return by_phrase


Suspects = Callable[[str], tuple[list[int], list[int]]]


@cache
def _suspect_lines(screen: opencc_cache.Screen | None) -> Suspects:
    """text -> (the indices of its lines that t2s may change, those it surely changes),
    from ``screen`` (in C when the extension is built); without a screen (None), every
    line may change and none surely does. Built once per process and screen (its
    bitmaps cost ~2 ms)."""
    if screen is None:
        return lambda text: (list(range(text.count("\n") + 1)), [])
    compiled = native.module()
    if compiled is not None:
        may, must = _bitmap(screen.chars), _bitmap(screen.certain)
        return lambda text: compiled.marked_lines(text, may, must)  # type: ignore[no-any-return]
    may_re = re.compile(f"[{re.escape(screen.chars)}]").search
    must_re = re.compile(f"[{re.escape(screen.certain)}]").search if screen.certain else None

    def lines_of(text: str) -> tuple[list[int], list[int]]:
        maybe = [i for i, line in enumerate(text.split("\n")) if may_re(line)]
        lines = text.split("\n")
        sure = [i for i in maybe if must_re is not None and must_re(lines[i])]
        return maybe, sure

    return lines_of


def _bitmap(chars: str) -> bytes:
    """A bit per code point, set for those of ``chars``."""
    marked = bytearray(0x110000 // 8)
    for c in map(ord, chars):
        marked[c >> 3] |= 1 << (c & 7)
    return bytes(marked)


def _fold_converter_version(fold: str = "t2s") -> str:
    """What the manifest records of the converter: OpenCC's release and its configs."""
    _opencc()
    configs = "t2s, tw2sp on Traditional lines" if fold == "tw2sp" else "t2s"
    return f"opencc {dist_version('opencc')} {configs}"


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def build_idf(texts: Iterable[str], fingerprinter: Fingerprinter) -> dict[str, float]:
    """IDF = ln(N / document frequency) over ``texts``, with the fingerprinter's terms.

    A term in every document weighs 0: site-wide boilerplate stops counting.
    """
    df: Counter[str] = Counter()
    n_docs = 0
    for text in texts:
        df.update(fingerprinter.features(text).keys())
        n_docs += 1
    if not n_docs:
        raise InvalidInput("no documents to build an IDF table from")
    return {term: math.log(n_docs / n) for term, n in df.items()}


def write_idf(table: dict[str, float], path: str) -> None:
    """'term idf' lines, sorted, so that the same corpus gives the same digest."""
    lines = [f"{term} {value:.6f}\n" for term, value in sorted(table.items()) if " " not in term]
    Path(path).write_text("".join(lines), encoding="utf-8")
