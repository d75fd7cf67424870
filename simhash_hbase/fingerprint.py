"""Text -> 64-bit SimHash: jieba terms, TF-IDF weights, top-N, mmh3, signed bit sums.

Every parameter that changes the output is in :class:`FingerprintParams`, which is
written to the index manifest; an index refuses a fingerprinter that differs.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import math
import multiprocessing
import re
import unicodedata
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Any

import jieba
import mmh3
import numpy as np

from .errors import EmptyDocument, InvalidInput

DEFAULT_TOP_N = 16  # best recall at k=3 in docs/quality.md (89.0% vs 87.2% for 64)
DEFAULT_SEED = 0
DEFAULT_NGRAM = 2
FEATURES = ("words", "chars")
BUILTIN_IDF = "jieba"
#: 1: the original recipe (kept bit for bit: indexes built with it answer as before).
#: 2: NFKC-normalised text, no pure numbers or 1-character ASCII tokens (see
#: :func:`v2_keeps`); the evaluation in docs/quality.md chose it.
FINGERPRINT_VERSIONS = (1, 2)
DEFAULT_VERSION = 1
#: Optional Traditional -> Simplified folding before tokenizing (v2 only; OpenCC).
FOLDS = ("none", "t2s")
_HAS_WORD_CHAR = re.compile(r"\w").search
_WORD_CHARS = re.compile(r"\w+")
_BIT_SHIFTS = np.arange(63, -1, -1, dtype=np.uint64)  # column 0 is bit 63 (MSB)
_ONE = np.uint64(1)


@dataclass(frozen=True)
class IdfTable:
    """Term -> IDF, plus the median used for unknown terms (the design source's rule)."""

    name: str
    digest: str
    idf: dict[str, float] = field(repr=False, compare=False)
    median: float


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _parse_idf(raw: bytes, source: str) -> dict[str, float]:
    table: dict[str, float] = {}
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            term, value = parts[0], float(parts[1])
        except (IndexError, ValueError):
            raise InvalidInput(
                f"{source}:{lineno}: expected 'term idf' per line, got {line[:60]!r}"
            ) from None
        table[term] = value
    if not table:
        raise InvalidInput(f"{source}: the IDF table is empty; build one with `shdb idf build`")
    return table


def _jieba_idf_path() -> Path:
    return Path(jieba.__file__).parent / "analyse" / "idf.txt"


@cache
def load_idf(path: str | None = None) -> IdfTable:
    """jieba's bundled table when ``path`` is None, else a 'term idf' text file."""
    source = Path(path) if path else _jieba_idf_path()
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read IDF table {source}: {exc.strerror}") from exc
    idf = _parse_idf(raw, str(source))
    values = sorted(idf.values())
    return IdfTable(
        name=BUILTIN_IDF if path is None else source.name,
        digest=_sha256(raw),
        idf=idf,
        median=values[len(values) // 2],
    )


@cache
def _stopwords() -> tuple[frozenset[str], str]:
    raw = resources.files("simhash_hbase").joinpath("data/stopwords.txt").read_bytes()
    return frozenset(raw.decode("utf-8").split()), _sha256(raw)


@cache
def _tokenizer() -> jieba.Tokenizer:
    jieba.setLogLevel(logging.WARNING)  # jieba prints "Building prefix dict" otherwise
    tok = jieba.Tokenizer()
    tok.initialize()
    return tok


@dataclass(frozen=True)
class FingerprintParams:
    """What the manifest records; two fingerprints are comparable iff these match."""

    top_n: int = DEFAULT_TOP_N
    seed: int = DEFAULT_SEED
    idf_path: str | None = None
    #: "words": jieba terms weighted by TF-IDF (long texts); "chars": character
    #: n-grams weighted by count (short texts, where a few words carry too little).
    features: str = "words"
    ngram: int = DEFAULT_NGRAM
    tokenizer: str = "jieba"
    hash: str = "mmh3.hash64[0]"
    bits: int = 64
    #: The text normalisation and term filter recipe (FINGERPRINT_VERSIONS).
    version: int = DEFAULT_VERSION
    #: "t2s": fold Traditional Chinese to Simplified first (version 2 only).
    fold: str = "none"

    def manifest(self) -> dict[str, Any]:
        idf = load_idf(self.idf_path)
        params = asdict(self)
        del params["idf_path"]  # a local path; the digest identifies the table
        if self.version == 1:  # v1 manifests predate these keys: absent means v1
            del params["version"], params["fold"]
        elif self.fold != "none":
            params["fold_converter"] = _fold_converter_version()
        params.update(
            tokenizer_version=jieba.__version__,
            idf_name=idf.name,
            idf_digest=idf.digest,
            stopwords_digest=_stopwords()[1],
        )
        return params


class Fingerprinter:
    """Turns texts into fingerprints; cheap to call once built (tables are cached)."""

    def __init__(self, params: FingerprintParams | None = None) -> None:
        self.params = params or FingerprintParams()
        if self.params.top_n < 1:
            raise InvalidInput(f"top-N must be at least 1, got {self.params.top_n}")
        if self.params.features not in FEATURES:
            raise InvalidInput(
                f"unknown features {self.params.features!r}; use one of: {', '.join(FEATURES)}"
            )
        if self.params.ngram < 1:
            raise InvalidInput(f"n-gram length must be at least 1, got {self.params.ngram}")
        _check_version(self.params)
        self._fold = _folder(self.params.fold)
        self._idf = load_idf(self.params.idf_path)
        self._stop = _stopwords()[0]
        self._cut = _tokenizer().cut

    def term_counts(self, text: str) -> Counter[str]:
        """Usable terms and their counts: no whitespace, punctuation or stop words."""
        if self.params.features == "chars":
            chars = "".join(_WORD_CHARS.findall(text.lower()))
            n = self.params.ngram
            return Counter(chars[i : i + n] for i in range(max(len(chars) - n + 1, 0)))
        counts: Counter[str] = Counter()
        for token, n in Counter(self._cut(text)).items():
            term = token.strip().lower()
            if term and term not in self._stop and _HAS_WORD_CHAR(term):
                counts[term] += n
        return counts

    def features(self, text: str) -> Counter[str]:
        """The terms a fingerprint is made of: :meth:`term_counts` of the normalised
        text, filtered by the version's rule (v1: the terms as they are)."""
        if self.params.version == 1:
            return self.term_counts(text)
        counts = self.term_counts(normalise(text, self._fold))
        return Counter({t: n for t, n in counts.items() if v2_keeps(t)})

    def weighted_terms(self, text: str) -> list[tuple[str, float]]:
        """The top-N (term, weight) pairs, heaviest first, ties broken by term.

        Words weigh count x IDF (the table's median IDF for unknown words);
        character n-grams weigh their count.
        """
        counts = self.features(text)
        if self.params.features == "chars":
            weighted = [(term, float(n)) for term, n in counts.items()]
        else:
            idf, median = self._idf.idf, self._idf.median
            weighted = [(term, n * idf.get(term, median)) for term, n in counts.items()]
            # A term in every document of a custom IDF table weighs 0: it carries no
            # signal, and texts made only of such terms must not share fingerprint 0.
            weighted = [tw for tw in weighted if tw[1] > 0.0]
        return heapq.nlargest(self.params.top_n, weighted, key=lambda tw: (tw[1], tw[0]))

    def bit_sums(self, text: str) -> np.ndarray:
        """The 64 signed, weighted sums whose signs are the fingerprint (MSB first)."""
        terms = self.weighted_terms(text)
        if not terms:
            raise EmptyDocument(
                "the text has no usable terms (it is empty, or only whitespace, "
                "punctuation or stop words); it cannot be fingerprinted"
            )
        seed = self.params.seed
        hashes = np.fromiter(
            (mmh3.hash64(term, seed, signed=False)[0] for term, _ in terms),
            dtype=np.uint64,
            count=len(terms),
        )
        weights = np.fromiter((w for _, w in terms), dtype=np.float64, count=len(terms))
        signs = ((hashes[:, None] >> _BIT_SHIFTS) & _ONE).astype(np.float64) * 2.0 - 1.0
        sums: np.ndarray = weights @ signs
        return sums

    def fingerprint(self, text: str) -> int:
        return _bits_of(self.bit_sums(text))

    def fingerprint_margins(self, text: str) -> tuple[int, np.ndarray]:
        """The fingerprint and each bit's margin: the |signed sum| that an edit must
        overcome to flip it. ``margins[i]`` belongs to bit ``i`` (value ``1 << i``);
        the smallest margins are the volatile bits that multi-probe flips."""
        sums = self.bit_sums(text)
        return _bits_of(sums), np.abs(sums[::-1])

    def fingerprint_or_error(self, text: str) -> int | EmptyDocument:
        try:
            return self.fingerprint(text)
        except EmptyDocument as exc:
            return exc

    def map(
        self, texts: Iterable[Sequence[str]], workers: int = 1
    ) -> Iterator[list[int | EmptyDocument]]:
        """Fingerprint chunks of texts, in order, across ``workers`` processes."""
        if workers <= 1:
            for chunk in texts:
                yield [self.fingerprint_or_error(t) for t in chunk]
            return
        # fork: children inherit the loaded dictionary and IDF table (no 1 s reload
        # each). A bounded window of chunks in flight keeps memory flat on endless
        # input, which Pool.imap (it drains its input eagerly) would not.
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(workers, initializer=_init_worker, initargs=(self.params,)) as pool:
            pending: deque[AsyncResult[list[int | EmptyDocument]]] = deque()
            for chunk in texts:
                pending.append(pool.apply_async(_worker_chunk, (chunk,)))
                if len(pending) > 2 * workers:
                    yield pending.popleft().get()
            while pending:
                yield pending.popleft().get()


_worker: Fingerprinter | None = None


def _init_worker(params: FingerprintParams) -> None:
    global _worker
    _worker = Fingerprinter(params)


def _worker_chunk(texts: Sequence[str]) -> list[int | EmptyDocument]:
    assert _worker is not None
    return [_worker.fingerprint_or_error(t) for t in texts]


def _bits_of(sums: np.ndarray) -> int:
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


def normalise(text: str, fold: Callable[[str], str] | None = None) -> str:
    """v2's text normalisation: NFKC (full-width Latin and digits become ASCII words,
    ligatures and circled numbers their plain forms), then the optional folding."""
    text = unicodedata.normalize("NFKC", text)
    return fold(text) if fold is not None else text


def _check_version(params: FingerprintParams) -> None:
    if params.version not in FINGERPRINT_VERSIONS:
        known = ", ".join(map(str, FINGERPRINT_VERSIONS))
        raise InvalidInput(f"unknown fingerprint version {params.version}; known: {known}")
    if params.fold not in FOLDS:
        raise InvalidInput(f"unknown folding {params.fold!r}; use one of: {', '.join(FOLDS)}")
    if params.fold != "none" and params.version < 2:
        raise InvalidInput("Traditional -> Simplified folding needs fingerprint version 2")


@cache
def _opencc() -> Any:
    try:
        import opencc
    except ImportError:
        raise InvalidInput(
            "Traditional -> Simplified folding needs OpenCC: pip install 'simhash-hbase[fold]'"
        ) from None
    return opencc


def _folder(fold: str) -> Callable[[str], str] | None:
    """OpenCC's Taiwan-to-Simplified conversion with phrases (tw2sp): 檔案 -> 文件."""
    if fold == "none":
        return None
    converter = _opencc().OpenCC("tw2sp")
    convert: Callable[[str], str] = converter.convert
    return convert


def _fold_converter_version() -> str:
    from importlib.metadata import version

    _opencc()
    return f"opencc {version('opencc')} tw2sp"


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
