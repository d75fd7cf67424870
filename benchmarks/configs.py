"""The fingerprint configurations under test, and fingerprinting all texts with them."""

from __future__ import annotations

import math
import multiprocessing
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from simhash import Simhash

from simhash_hbase.errors import EmptyDocument
from simhash_hbase.fingerprint.simhash import (
    DEFAULT_TOP_N,
    Fingerprinter,
    FingerprintParams,
    build_idf,
    builtin_idf,
    load_idf_file,
    write_idf,
)

from .common import log
from .texts import LONG, SEED, Item, fold_of


@dataclass(frozen=True)
class Config:
    """A fingerprint under test. family: words | chars | proto (words with a code change
    prototyped here) | pypi (the PyPI simhash baseline)."""

    name: str
    family: str
    top_n: int = 64
    ngram: int = 2
    domain_idf: bool = False

    def params(self, idf_path: str | None) -> FingerprintParams:
        return FingerprintParams(
            top_n=self.top_n,
            features="chars" if self.family == "chars" else "words",
            ngram=self.ngram,
            idf=load_idf_file(idf_path).digest if self.domain_idf and idf_path else None,
        )

    def describe(self) -> str:
        if self.family == "pypi":
            return "PyPI simhash 2.x default: 4-char shingles of \\w chars, md5, all features"
        if self.family == "chars":
            return f"features=chars, ngram={self.ngram}, top_n={self.top_n}"
        idf = "domain IDF (other half)" if self.domain_idf else "jieba IDF"
        proto = "; PROTOTYPE: pure numbers and 1-char ASCII tokens dropped" * (
            self.family == "proto"
        )
        return f"features=words, top_n={self.top_n}, {idf}{proto}"


DEFAULT = f"words-t{DEFAULT_TOP_N}"  # the shipped default


TOP_NS = (16, 32, 64, 128, 256)


CHAR_NGRAMS = (2, 3)


CHAR_TOP_NS = (64, 128, 256, 1024)


def configs() -> list[Config]:
    out = [Config(f"words-t{n}", "words", top_n=n) for n in TOP_NS]
    out += [Config(f"words-t{n}-didf", "words", top_n=n, domain_idf=True) for n in TOP_NS]
    out += [Config(f"proto-t{n}", "proto", top_n=n) for n in (64, 128)]
    out += [
        Config(f"chars-n{g}-t{n}", "chars", top_n=n, ngram=g)
        for g in CHAR_NGRAMS
        for n in CHAR_TOP_NS
    ]
    out.append(Config("pypi-simhash", "pypi"))
    return out


class SharedWordCounts(Fingerprinter):
    """jieba is most of the cost, and words-mode term counts do not depend on top_n or
    the IDF table: cut each text once for every words configuration. Everything after
    the counts (weights, top-N, hashing) is the package's own code."""

    _last: ClassVar[tuple[str, Counter[str]] | None] = None

    def term_counts(self, text: str) -> Counter[str]:
        if self.params.features != "words":
            return super().term_counts(text)
        last = SharedWordCounts._last
        if last is None or last[0] is not text:
            last = (text, super().term_counts(text))
            SharedWordCounts._last = last
        return last[1]


_NOISE_TOKEN = re.compile(r"[0-9][0-9.,:/-]*|[a-z0-9]")


class DropNoiseTokens(SharedWordCounts):
    """PROTOTYPE of a code change, not the package's behaviour: pure numbers and single
    ASCII characters are dropped. jieba's IDF table has no ASCII entries, so these get
    the median IDF (11.95, more than most Chinese words) and crowd the top-N."""

    def term_counts(self, text: str) -> Counter[str]:
        counts = super().term_counts(text)
        return Counter({t: n for t, n in counts.items() if not _NOISE_TOKEN.fullmatch(t)})


class PatchedSimhash(Simhash):  # type: ignore[misc]  # simhash ships no type hints
    """simhash 2.1.2 multiplies a uint8 bit array by a feature's count; under NumPy 2
    that raises OverflowError for counts over 255 (NumPy 1 upcast silently). Upcasting
    first restores NumPy 1's result exactly."""

    @staticmethod
    def _bitarray_from_bytes(b: bytes) -> Any:
        return np.unpackbits(np.frombuffer(b, dtype=">B")).astype(np.int64)


FingerprintFn = Callable[[str], "int | None"]


def fingerprint_fn(config: Config, idf_path: str | None) -> FingerprintFn:
    if config.family == "pypi":
        return lambda text: PatchedSimhash(text).value
    cls = DropNoiseTokens if config.family == "proto" else SharedWordCounts
    fp = cls(config.params(idf_path))

    def run(text: str) -> int | None:
        out = fp.fingerprint_or_error(text)
        return None if isinstance(out, EmptyDocument) else out

    return run


_FNS: dict[int, list[FingerprintFn]] = {}


def _init_worker(cfgs: list[Config], idf_paths: dict[int, str]) -> None:
    for fold in (0, 1):
        _FNS[fold] = [fingerprint_fn(c, idf_paths[fold]) for c in cfgs]


def _fingerprint_chunk(chunk: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    n_cfg = len(_FNS[0])
    fps = np.zeros((len(chunk), n_cfg), dtype=np.uint64)
    ok = np.zeros((len(chunk), n_cfg), dtype=bool)
    for row, (text, fold) in enumerate(chunk):
        for col, fn in enumerate(_FNS[fold]):
            value = fn(text)
            if value is not None:
                fps[row, col], ok[row, col] = value, True
    return fps, ok


def chunks_by_size(texts: Sequence[tuple[str, int]], max_chars: int = 100_000) -> list[list[int]]:
    """Row indices in chunks of about ``max_chars`` (at most 64 texts), longest texts first:
    equal work per task, and the small tasks at the end let both cores finish together."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i][0]))
    out: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in order:
        current.append(i)
        size += len(texts[i][0])
        if size >= max_chars or len(current) >= 64:
            out.append(current)
            current, size = [], 0
    return [*out, current] if current else out


def fingerprint_all(
    texts: Sequence[tuple[str, int]],
    cfgs: list[Config],
    idf_paths: dict[int, str],
    workers: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(fingerprints, usable) of shape (texts, configs); usable is False on EmptyDocument."""
    index_chunks = chunks_by_size(texts)
    tasks = [[texts[i] for i in rows] for rows in index_chunks]
    fps = np.zeros((len(texts), len(cfgs)), dtype=np.uint64)
    ok = np.zeros((len(texts), len(cfgs)), dtype=bool)
    start = time.perf_counter()
    if workers <= 1:
        _init_worker(cfgs, idf_paths)
        results: Iterable[tuple[np.ndarray, np.ndarray]] = map(_fingerprint_chunk, tasks)
        for i, (f, o) in enumerate(results):
            fps[index_chunks[i]], ok[index_chunks[i]] = f, o
            _progress(i, len(tasks), start)
        return fps, ok
    ctx = multiprocessing.get_context("fork")  # children inherit jieba's loaded dictionary
    with ctx.Pool(workers, initializer=_init_worker, initargs=(cfgs, idf_paths)) as pool:
        for i, (f, o) in enumerate(pool.imap(_fingerprint_chunk, tasks)):
            fps[index_chunks[i]], ok[index_chunks[i]] = f, o
            _progress(i, len(tasks), start)
    return fps, ok


def _progress(i: int, total: int, start: float) -> None:
    step = max(total // 10, 1)
    if (i + 1) % step == 0 or i + 1 == total:
        elapsed = time.perf_counter() - start
        log(f"  fingerprinted {100 * (i + 1) // total}% ({elapsed:.0f} s)")


def self_check(
    cfgs: list[Config],
    idf_paths: dict[int, str],
    texts: list[tuple[str, int]],
    fps: np.ndarray,
    ok: np.ndarray,
) -> None:
    """The shared-count shortcut must give exactly the package's fingerprints."""
    rng = random.Random(SEED)
    for row in rng.sample(range(len(texts)), min(25, len(texts))):
        text, fold = texts[row]
        for col, c in enumerate(cfgs):
            if c.family in ("proto", "pypi") or not ok[row, col]:
                continue
            expected = Fingerprinter(c.params(idf_paths[fold])).fingerprint(text)
            if int(fps[row, col]) != expected:
                raise SystemExit(f"self-check failed: {c.name} on text {row}")


def _idf_for_fold(task: tuple[int, list[str], str]) -> dict[str, float]:
    """Build and write one table; describe what an unseen term will weigh in it."""
    _, held_out, path = task
    table_ = build_idf(held_out, Fingerprinter())
    write_idf(table_, path)
    values = sorted(table_.values())
    median = values[len(values) // 2]  # what the IDF table gives unknown terms
    return {
        "docs": len(held_out),
        "terms": len(values),
        "median": median,
        "max": values[-1],
        "df_at_median": len(held_out) / math.exp(median),
        "share_at_or_above_median": sum(v >= median for v in values) / len(values),
    }


def domain_idf(
    docs: Sequence[tuple[str, str]], tmp: Path, workers: int
) -> tuple[dict[int, str], list[dict[str, float]]]:
    """fold -> path of an IDF table built on the *other* fold's documents (both at once)."""
    tasks = [
        (fold, [t for d, t in docs if fold_of(d) != fold], str(tmp / f"idf-for-fold{fold}.txt"))
        for fold in (0, 1)
    ]
    if workers <= 1:
        sizes = [_idf_for_fold(t) for t in tasks]
    else:
        Fingerprinter()  # load jieba once, before forking
        with multiprocessing.get_context("fork").Pool(min(workers, 2)) as pool:
            sizes = pool.map(_idf_for_fold, tasks)
    return {fold: path for fold, _, path in tasks}, sizes


def jieba_idf_facts() -> dict[str, Any]:
    """What jieba's bundled table gives ASCII tokens (nothing: they all get the median)."""
    table_ = builtin_idf()
    return {
        "entries": len(table_.idf),
        "ascii_entries": sum(t.isascii() for t in table_.idf),
        "median": table_.median,
        **{w: table_.idf.get(w, table_.median) for w in ("文件", "用户", "的")},
    }


def ascii_top_share(items: list[Item], limit: int = 200) -> float:
    """Mean share of pure-ASCII terms among the default top-64 terms of Chinese man pages."""
    fp = Fingerprinter()
    pages = [x for x in items if x.stratum in LONG and "/man/" in x.id][:limit]
    shares = []
    for x in pages:
        terms = fp.weighted_terms(x.text)
        shares.append(sum(t.isascii() for t, _ in terms) / len(terms) if terms else 0.0)
    return sum(shares) / len(shares) if shares else float("nan")
