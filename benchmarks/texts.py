"""The texts of the quality evaluation: documents, short texts, strata and halves."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

SEED = 6  # the issue number; every RNG below derives from it


LONG_MIN = 200  # below this a text is "short" and edits are scaled down


CJK_MIN_SHARE = 0.2  # of word characters; below it a page is an untranslated English page


PARA_MIN, PARA_MAX = 40, 200


# Strata of the evaluated texts: two kinds of short text, three length bands of Chinese
# documents, and the (untranslated) English pages of the same packages, kept apart.
STRATA = ("line", "para", "200-500", "500-1000", ">1000", "en")


LONG = ("200-500", "500-1000", ">1000")


SETS: dict[str, tuple[str, ...]] = {
    "long>500": ("500-1000", ">1000"),
    "long": LONG,
    "short": ("line", "para"),
    "line": ("line",),
    "para": ("para",),
    "<200": ("line", "para"),
    "200-1000": ("200-500", "500-1000"),
    ">1000": (">1000",),
    "en": ("en",),
}


SET_LABELS = {
    "long>500": "Chinese documents > 500 chars",
    "long": "Chinese documents >= 200 chars",
    "short": "short texts (one-line descriptions + paragraphs)",
    "line": "one-line descriptions (man page NAME lines)",
    "para": f"paragraphs of {PARA_MIN}-{PARA_MAX} chars",
    "en": "English-dominated pages of the same packages",
    "200-500": "Chinese documents of 200-500 chars",
    "500-1000": "Chinese documents of 500-1000 chars",
    ">1000": "Chinese documents over 1000 chars",
}


WORD_CHAR = re.compile(r"\w")


WORD_RUN = re.compile(r"\w+")


CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


DIGIT_RUN = re.compile(r"[0-9]+")


SENTENCE_END = re.compile(r"(?<=[。！？!?\n])")


CLAUSE_END = re.compile(r"(?<=[。！？!?\n，,；;：:、])")


PARA_END = ("。", "！", "？", "!", "?")


CLAUSE_PUNCT = re.compile(r"[，,。；;：:！？!?、]")


def stable_hash(*parts: object) -> int:
    """Python's hash() is salted per process; samples and folds must not be."""
    raw = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big")


def rng_for(*parts: object) -> random.Random:
    return random.Random(stable_hash(SEED, *parts))


def cjk_share(text: str) -> float:
    words = len(WORD_CHAR.findall(text))
    return len(CJK_CHAR.findall(text)) / words if words else 0.0


@dataclass(frozen=True)
class Item:
    """An original text. ``fold`` (0/1) decides which half builds its domain IDF."""

    id: str
    text: str
    fold: int
    stratum: str


def fold_of(doc_id: str) -> int:
    """Split by page name, so that a page's zh_CN and zh_TW copies (and its other
    sections) land in the same half; a domain IDF then never saw the page it scores."""
    name = doc_id.rsplit("/", 1)[-1].split(".", 1)[0]
    return stable_hash("fold", name) & 1


def long_stratum(text: str) -> str:
    if cjk_share(text) < CJK_MIN_SHARE:
        return "en"
    n = len(text)
    return "200-500" if n < 500 else "500-1000" if n < 1000 else ">1000"


def blocks(text: str) -> list[str]:
    """Paragraphs of a hard-wrapped page: runs of lines ending in a sentence-final mark.

    A short line without clause punctuation is a heading and stands alone. Joining the
    blocks with newlines gives the text back, which ``paragraph_moved`` relies on.
    """
    out: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            out.append("\n".join(current))
            current.clear()

    for line in text.split("\n"):
        if len(line) < 16 and not CLAUSE_PUNCT.search(line):
            flush()
            out.append(line)
            continue
        current.append(line)
        if line.endswith(PARA_END):
            flush()
    flush()
    return out


def unwrap(block: str) -> str:
    """Join hard-wrapped lines: no space between CJK characters, one between words."""
    lines = [x.strip() for x in block.split("\n") if x.strip()]
    out = lines[0] if lines else ""
    for line in lines[1:]:
        ascii_seam = out[-1:].isascii() and line[:1].isascii()
        out += (" " if ascii_seam else "") + line
    return out


def name_line(text: str) -> str | None:
    """A man page's one-line description: the line after its NAME heading."""
    lines = text.split("\n")
    for i, line in enumerate(lines[:6]):
        head = line.strip().upper()
        if head.startswith(("NAME", "名称", "名稱")) and len(head) <= 12 and i + 1 < len(lines):
            candidate = lines[i + 1].strip()
            return candidate if CJK_CHAR.search(candidate) else None
    return None


def sample(items: list[Item], per_fold: int | None, salt: str) -> list[Item]:
    """At most ``per_fold`` items of each fold, chosen by a seeded hash of the id."""
    if per_fold is None:
        return items
    out: list[Item] = []
    for fold in (0, 1):
        mine = sorted((x for x in items if x.fold == fold), key=lambda x: stable_hash(salt, x.id))
        out.extend(mine[:per_fold])
    return sorted(out, key=lambda x: x.id)


def short_items(docs: Sequence[tuple[str, str]]) -> list[Item]:
    """Paragraphs (40-200 chars, mostly Chinese) and NAME lines, each exactly once."""
    seen: set[str] = set()
    out: list[Item] = []
    for doc_id, text in docs:
        if cjk_share(text) < CJK_MIN_SHARE:
            continue
        fold = fold_of(doc_id)
        line = name_line(text) if "/man/" in doc_id else None
        if line and line not in seen:
            seen.add(line)
            out.append(Item(f"{doc_id}#name", line, fold, "line"))
        for i, block in enumerate(blocks(text)):
            para = unwrap(block)
            if PARA_MIN <= len(para) <= PARA_MAX and cjk_share(para) >= 0.5 and para not in seen:
                seen.add(para)
                out.append(Item(f"{doc_id}#p{i}", para, fold, "para"))
    return out


def sentence_pool(docs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(doc id, sentence) of complete Chinese sentences, for "a sentence added"."""
    pool: list[tuple[str, str]] = []
    for doc_id, text in docs:
        for block in blocks(text):
            for sentence in re.split(r"(?<=[。！？])", unwrap(block)):
                sentence = sentence.strip()
                if (
                    6 <= len(sentence) <= 80
                    and sentence.endswith(("。", "！", "？"))
                    and CJK_CHAR.match(sentence)
                    and cjk_share(sentence) >= 0.6
                ):
                    pool.append((doc_id, sentence))
    pool.sort(key=lambda x: (len(x[1]), x))
    return pool


@dataclass
class Sizes:
    """How much of the corpus a mode uses, per half (None: all)."""

    zh_per_fold: int | None
    en_per_fold: int | None  # the English pages are a side table: a sample is enough
    para_per_fold: int | None
    line_per_fold: int | None


SIZE_LABELS = {
    "zh_per_fold": "Chinese documents",
    "en_per_fold": "English pages",
    "para_per_fold": "paragraphs",
    "line_per_fold": "one-line descriptions",
}


FULL = Sizes(zh_per_fold=None, en_per_fold=150, para_per_fold=2500, line_per_fold=None)


QUICK = Sizes(zh_per_fold=120, en_per_fold=30, para_per_fold=300, line_per_fold=150)


SMOKE = Sizes(zh_per_fold=12, en_per_fold=3, para_per_fold=30, line_per_fold=15)


SIZES = {"full": FULL, "quick": QUICK, "smoke": SMOKE}


def build_items(docs: Sequence[tuple[str, str]], sizes: Sizes) -> tuple[list[Item], list[Item]]:
    """(documents, short texts) to evaluate: a seeded sample of each kind, per half."""
    long_all = [Item(d, t, fold_of(d), long_stratum(t)) for d, t in docs]
    shorts = short_items(docs)
    zh = sample([x for x in long_all if x.stratum != "en"], sizes.zh_per_fold, "zh")
    en = sample([x for x in long_all if x.stratum == "en"], sizes.en_per_fold, "en")
    paras = sample([x for x in shorts if x.stratum == "para"], sizes.para_per_fold, "para")
    lines = sample([x for x in shorts if x.stratum == "line"], sizes.line_per_fold, "line")
    return sorted(zh + en, key=lambda x: x.id), sorted(paras + lines, key=lambda x: x.id)
