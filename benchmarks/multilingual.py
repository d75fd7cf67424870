"""Fingerprints outside Chinese: real translated text in many scripts (issue 39.1).

The texts are the gettext catalogs installed on the machine
(``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``): every translated message of a
language, cleaned of mnemonics (``_File``) and format directives, deduplicated, and
kept when most of its letters are of the language's script (no untranslated English),
shuffled by a seeded RNG and grouped into documents of ~:data:`DOC_CHARS` characters:
unrelated documents of one language, as a bag of a program's messages is. The catalogs
are split in two by their file name (:func:`part_of`): the development set, on which
fingerprint versions were tuned, and the held-out set, measured only: no program's
catalog is in both, and no message either.

Per language, set and fingerprint version, the section counts the pairs of unrelated
documents within 3 bits (for random 64-bit fingerprints: ~0), the planted copies (three
word edits: a word deleted, one doubled, one replaced by another of the document) within
3 bits, and those the index finds (both nets, the default). ``tests/data/multilingual.json``
is a small sample of the same texts (``python -m benchmarks.multilingual --fixture``).

    python -m benchmarks.multilingual            # the table, on stdout
"""

from __future__ import annotations

import argparse
import gettext
import json
import random
import re
import sys
import tempfile
import zlib
from itertools import combinations
from pathlib import Path
from typing import Any

import regex

from .common import ROOT
from .registry import Figure, Section, Skipped, Target, register
from .report import fill, table

LOCALES = Path("/usr/share/locale")
FIXTURE = ROOT / "tests" / "data" / "multilingual.json"
#: Language -> (what the table calls it, the script most of its letters are in).
LANGUAGES = {
    "ru": ("Russian", "Cyrillic"),
    "uk": ("Ukrainian", "Cyrillic"),
    "ar": ("Arabic", "Arabic"),
    "fa": ("Persian", "Arabic"),
    "he": ("Hebrew", "Hebrew"),
    "el": ("Greek", "Greek"),
    "hi": ("Hindi", "Devanagari"),
    "bn": ("Bengali", "Bengali"),
    "ta": ("Tamil", "Tamil"),
    "ka": ("Georgian", "Georgian"),
    "th": ("Thai", "Thai"),
    "km": ("Khmer", "Khmer"),
    "my": ("Burmese", "Myanmar"),
    "tr": ("Turkish", "Latin"),
    "fr": ("French", "Latin"),
    "de": ("German", "Latin"),
    "es": ("Spanish", "Latin"),
    "pl": ("Polish", "Latin"),
    "vi": ("Vietnamese", "Latin"),
    "ko": ("Korean", "Hangul"),
    "ja": ("Japanese", "Han Hiragana Katakana"),
    "zh_CN": ("Chinese", "Han"),
}
DOC_CHARS = 800
_EDGE = 40
#: The two sets (:func:`part_of`) and the documents a language each holds at most.
PARTS = {"development": 160, "held-out": 300}
#: The versions compared: the one before and the default.
VERSIONS = (3, 4)
K = 3
_MNEMONIC = re.compile(r"[_&](?=\w)|%(?:\d+\$)?[-+ #0-9.*]*[a-zA-Z]")
_WORD = regex.compile(r"\S+")
_LETTER = regex.compile(r"\p{L}")


def _in_script(script: str) -> Any:
    names = "".join(f"\\p{{{name}}}" for name in script.split())
    return regex.compile(f"[{names}]")


def part_of(mo: Path) -> str:
    """The set a catalog is in, by its file name (the same program's catalog is in the
    same set in every language): held out by catalog, not by message, so that no
    program's wording is on both sides."""
    return "development" if zlib.crc32(mo.name.encode()) % 2 == 0 else "held-out"


def _catalog_messages(lang: str, part: str) -> set[str]:
    """The language's translated messages in ``part``'s catalogs, cleaned."""
    wanted = _in_script(LANGUAGES[lang][1])
    seen: set[str] = set()
    for mo in sorted((LOCALES / lang / "LC_MESSAGES").glob("*.mo")):
        if part_of(mo) != part:
            continue
        try:
            with mo.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, ValueError):  # a damaged catalog, or one not in UTF-8
            continue
        for key, text in catalog.items():
            if not key or not isinstance(text, str):
                continue
            text = " ".join(_MNEMONIC.sub("", text).split())
            letters = _LETTER.findall(text)
            if len(text) < 20 or len(wanted.findall(text)) < 0.8 * len(letters):
                continue
            seen.add(text)
    return seen


def messages(lang: str, part: str) -> list[str]:
    """The language's messages in ``part``'s catalogs, deduplicated, in a seeded order.
    Programs share messages (a library's, as gnulib's): a held-out message is in no
    catalog of the development set."""
    seen = _catalog_messages(lang, part)
    if part != "development":
        seen -= _catalog_messages(lang, "development")
    ordered = _distinct(sorted(seen))
    random.Random(lang).shuffle(ordered)
    return ordered


def _distinct(texts: list[str]) -> list[str]:
    """``texts`` less those that begin or end as an earlier one does (:data:`_EDGE`
    characters): one program's variants of a message (bash's help of ``popd`` with and
    without its summary line) are near-copies, not unrelated text."""
    edges: set[str] = set()
    kept: list[str] = []
    for text in texts:
        ends = {"^" + text[:_EDGE], "$" + text[-_EDGE:]}
        if not ends & edges:
            kept.append(text)
        edges |= ends
    return kept


def documents(lang: str, part: str, count: int, chars: int = DOC_CHARS) -> list[str]:
    """Up to ``count`` documents of ~``chars`` characters, each a run of messages."""
    docs: list[str] = []
    lines: list[str] = []
    size = 0
    for text in messages(lang, part):
        lines.append(text)
        size += len(text)
        if size >= chars:
            docs.append("\n".join(lines))
            lines, size = [], 0
            if len(docs) == count:
                break
    return docs


def planted(text: str, rnd: random.Random) -> str:
    """``text`` with three word edits: delete one, double one, replace one."""
    for op in range(3):
        words = list(_WORD.finditer(text))
        at = rnd.choice(words)
        new = ("", f"{at.group()} {at.group()}", rnd.choice(words).group())[op]
        text = text[: at.start()] + new + text[at.end() :]
    return text


def measure(docs: list[str], version: int) -> dict[str, Any]:
    """Pairs within :data:`K` bits, planted copies within K and found by the index."""
    from simhash_hbase import FingerprintParams, SimhashIndex

    params = FingerprintParams(version=version)
    rnd = random.Random(len(docs))
    copies = [planted(d, rnd) for d in docs]
    with tempfile.TemporaryDirectory() as tmp, SimhashIndex.open(tmp, params=params) as ix:
        fps = [ix.add(str(i), d) for i, d in enumerate(docs)]
        near = sum((a ^ b).bit_count() <= K for a, b in combinations(fps, 2))
        within = sum((ix.fingerprint(c) ^ f).bit_count() <= K for c, f in zip(copies, fps))
        found = sum(str(i) in {m.doc_id for m in ix.query(c, K)} for i, c in enumerate(copies))
        false = sum(len({m.doc_id for m in ix.query(d, K)} - {str(i)}) for i, d in enumerate(docs))
    return {"docs": len(docs), "near_pairs": near, "within_k": within, "found": found,
            "false_pairs": false}  # fmt: skip


def corpus(part: str) -> dict[str, list[str]]:
    """``part``'s documents of every language."""
    return {lang: documents(lang, part, PARTS[part]) for lang in LANGUAGES}


def measure_all(sets: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """Set -> language -> "v3"/"v4" -> :func:`measure` (languages of 2 documents or more)."""
    return {
        part: {
            lang: {f"v{v}": measure(docs, v) for v in VERSIONS}
            for lang, docs in langs.items()
            if len(docs) >= 2
        }
        for part, langs in sets.items()
    }


def run(ev: Any) -> dict[str, Any]:
    if ev.mode == "smoke":
        return measure_all({"development": json.loads(FIXTURE.read_text("utf-8"))})
    if not LOCALES.is_dir():
        raise Skipped(f"no gettext catalogs under {LOCALES}")
    return measure_all({part: corpus(part) for part in PARTS})


def _total(res: dict[str, Any], version: str) -> int:
    return sum(r[version]["near_pairs"] for langs in res.values() for r in langs.values())


def figures(res: dict[str, Any]) -> list[Figure]:
    near, before = _total(res, "v4"), _total(res, "v3")
    held = sum(r["v4"]["near_pairs"] for r in res.get("held-out", {}).values())
    rates = [r["v4"]["found"] / r["v4"]["docs"] for langs in res.values() for r in langs.values()]
    found = min(rates)
    return [
        Figure.judge(
            "unrelated same-language pairs within 3 bits, v4, all languages, both sets",
            near,
            Target.at_most(0, " pairs"),
            measured=f"{near} pairs ({held} held out)",
            baseline=f"v3: {before} pairs",
        ),
        Figure.judge(
            "planted copies found by the index, v4, worst language",
            found,
            Target.at_least(0.95, "%"),
            measured=f"{found:.1%}",
            baseline="-",
        ),
    ]


def rows(res: dict[str, Any]) -> list[tuple[object, ...]]:
    """One row a language and set: before (v3) and after (v4)."""
    out: list[tuple[object, ...]] = []
    for part, langs in res.items():
        for lang, r in langs.items():
            name, script = LANGUAGES.get(lang, (lang, "?"))
            v3, v4 = r["v3"], r["v4"]
            out.append((
                f"{name} (`{lang}`)", script, part, v4["docs"], v3["near_pairs"],
                v4["near_pairs"], f"{v3['within_k'] / v3['docs']:.2f}",
                f"{v4['within_k'] / v4['docs']:.2f}", f"{v4['found'] / v4['docs']:.2f}",
                v4["false_pairs"],
            ))  # fmt: skip
    return out


HEADER = (
    "language", "script", "set", "documents", "pairs within 3 bits, v3",
    "pairs within 3 bits, v4", "copies within 3 bits, v3", "copies within 3 bits, v4",
    "copies found by the index, v4", "false pairs, v4",
)  # fmt: skip


def render(res: dict[str, Any]) -> str:
    sizes = "up to " + ", ".join(f"{n} in the {part} set" for part, n in PARTS.items())
    return fill("eval/multilingual.md", table=table(HEADER, rows(res)), docs=sizes, k=K)


register(
    Section(
        "multilingual",
        "Every script: unrelated documents and planted copies per language",
        run,
        figures,
        render=render,
        suite="eval",
        order=70,
    )
)


def write_fixture(count: int = 8, chars: int = 500) -> None:
    """``tests/data/multilingual.json``: ``count`` documents a language, of the
    languages of :data:`LANGUAGES` the tests check (a few KB each)."""
    langs = ("ru", "uk", "ar", "fa", "he", "el", "hi", "th", "km", "tr", "fr", "vi", "ko",
             "ja", "zh_CN")  # fmt: skip
    sample = {lang: documents(lang, "development", count, chars) for lang in langs}
    FIXTURE.write_text(json.dumps(sample, ensure_ascii=False, indent=0) + "\n", "utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixture", action="store_true", help="write the tests' sample")
    args = parser.parse_args(argv)
    if args.fixture:
        write_fixture()
        return 0
    res = measure_all({part: corpus(part) for part in PARTS})
    sys.stdout.write(table(HEADER, rows(res)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
