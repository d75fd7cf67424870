"""Templated English documentation: planted copies among template siblings.

    python -m benchmarks.templated [--quick|--smoke] [--size N]
        # its section of docs/quality.md, bench-results/templated[-quick].json

Documentation on this machine, as plain text: manual pages rendered by ``man``
(sections 1, 3, 5, 7, 8: generated command references such as ``gcloud`` and
``docker``, libc's math functions, PostgreSQL's SQL commands) and the pydoc text of
the standard library's classes (their inherited-method blocks are a generator's
template). Pages are taken in runs of consecutive names, so that siblings of one
template (``cosh(3)`` and ``tan(3)``, ``ABORT(7)`` and ``ROLLBACK(7)``) stay in the
set together, unplanted: they are the hard negatives. Every ``PLANT_EVERY``-th page
gets one planted copy of one kind, in turn:

- ``exact``: the same text;
- ``edits``: 3-8 words replaced by other words of the page;
- ``reorder``: two of its paragraphs swapped;
- ``boilerplate``: its first and last lines (a man page's header and footer) replaced
  and a mirror's banner added;
- ``rewrap``: its paragraphs re-flowed to another width.

Measured with the library's own judge (:func:`benchmarks.judged.net_pairs`, default
settings): recall of each kind, and over every reported pair the share whose exact
character 5-gram Jaccard is under 0.5 (under the match threshold: not a matter of
taste), which issue 41 bounds at 0.5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simhash_hbase.errors import EmptyDocument
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.index.client import SimhashIndex

from .common import CACHE_DIR, RESULTS_DIR, committed_section, log, replace_section
from .judged import NO_EVIDENCE_ROW, Page, net_pairs, sign, under_half

KINDS = ("exact", "edits", "reorder", "boilerplate", "rewrap")
MODES = {"full": 3000, "quick": 1200, "smoke": 120}
PLANT_EVERY = 5
RUN = 25  # consecutive names taken together: template siblings stay in the set
MAN_SECTIONS = ("man1", "man3", "man5", "man7", "man8")
MAN_ROOT = Path("/usr/share/man")
MAX_CHARS = 20_000
BEGIN = "<!-- templated:begin -->"
END = "<!-- templated:end -->"

_PYDOC = r"""
import importlib, json, pydoc, sys, warnings
warnings.simplefilter("ignore")
skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__"}
for name in sorted(sys.stdlib_module_names):
    if name.startswith("_") or name in skip:
        continue
    try:
        mod = importlib.import_module(name)
    except BaseException:
        continue
    for attr in sorted(vars(mod)):
        obj = getattr(mod, attr)
        if attr.startswith("_") or not isinstance(obj, type) or obj.__module__ != name:
            continue
        try:
            text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        except BaseException:
            continue
        print(json.dumps({"id": f"pydoc/{name}.{attr}", "text": text}))
"""


def _man_pages() -> list[Path]:
    return [p for s in MAN_SECTIONS for p in sorted((MAN_ROOT / s).glob("*")) if p.is_file()]


def _render_man(path: Path) -> str | None:
    env = {**os.environ, "MANWIDTH": "80", "LANG": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    try:
        done = subprocess.run(
            ["man", "-l", "-P", "cat", str(path)],
            capture_output=True,
            env=env,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode("utf-8", "replace")
    return text if done.returncode == 0 and len(text) >= 200 else None


def _pydoc_pages() -> list[tuple[str, str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PYDOC], capture_output=True, timeout=600, check=False
    )
    out = []
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        out.append((row["id"], row["text"]))
    return out


def _runs(names: Sequence[Any], count: int, rng: random.Random) -> list[Any]:
    """About ``count`` of ``names`` in runs of RUN consecutive ones, in name order."""
    starts = list(range(0, len(names), RUN))
    rng.shuffle(starts)
    picked: list[int] = []
    for s in starts:
        if len(picked) >= count:
            break
        picked += range(s, min(s + RUN, len(names)))
    return [names[i] for i in sorted(picked[:count])]


def generated(size: int, seed: int = 0) -> list[tuple[str, str]]:
    """``size`` pages of generated manual-page shape (``--smoke``: no man, no
    pydoc): one template (a header and a long shared footer) around each page's
    own words, so that siblings share 25-50 % of their shingles."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(4, 9))) for _ in range(5000)]
    footer = "SEE ALSO\n" + textwrap.fill(" ".join(rng.choice(words) for _ in range(200)), 78)
    pages = []
    for i in range(size):
        name = rng.choice(words)
        body = "\n\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(25, 75))) for _ in range(4)
        )
        head = f"{name.upper()}(3)    Library Functions Manual    {name.upper()}(3)"
        foot = f"generated 1.0    2024-01-01    {name.upper()}(3)"
        text = f"{head}\n\nDESCRIPTION\n{textwrap.fill(body, 78)}\n\n{footer}\n\n{foot}"
        pages.append((f"gen/{i}-{name}", text))
    return pages


def sources(size: int, seed: int = 0) -> list[tuple[str, str]]:
    """``size`` documentation pages (id, text): two thirds manual pages, one third
    pydoc; rendered once and cached in the benchmarks' cache folder."""
    cache = CACHE_DIR / f"templated-{size}-{seed}.jsonl"
    if cache.exists():
        return [tuple(json.loads(line)) for line in cache.read_text("utf-8").splitlines()]  # type: ignore[misc]
    rng = random.Random(seed)
    man = _man_pages()
    if not man:
        raise RuntimeError(f"no manual pages under {MAN_ROOT}: apt-get install man-db manpages")
    pages: list[tuple[str, str]] = []
    log(f"templated: rendering {2 * size // 3} manual pages")
    for path in _runs(man, 2 * size // 3 + size // 10, rng):  # some fail to render
        text = _render_man(path)
        if text is not None:
            pages.append((f"man/{path.parent.name}/{path.name}", text[:MAX_CHARS]))
        if len(pages) >= 2 * size // 3:
            break
    log("templated: pydoc of the standard library's classes")
    api = _pydoc_pages()
    pages += [(i, t[:MAX_CHARS]) for i, t in _runs(api, size - len(pages), rng)]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("".join(json.dumps(p) + "\n" for p in pages), "utf-8")
    return pages


# -- planted copies ----------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z]{4,}")


def _edits(text: str, rng: random.Random) -> str:
    words = list(_WORD.finditer(text))
    if len(words) < 10:
        return text + " (edited)"
    chosen = sorted(rng.sample(range(len(words)), rng.randint(3, 8)), reverse=True)
    for i in chosen:
        m = words[i]
        text = text[: m.start()] + rng.choice(words).group() + text[m.end() :]
    return text


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def _reorder(text: str, rng: random.Random) -> str:
    parts = _paragraphs(text)
    if len(parts) < 3:
        return "\n\n".join(parts[::-1])
    i, j = rng.sample(range(1, len(parts)), 2)
    parts[i], parts[j] = parts[j], parts[i]
    return "\n\n".join(parts)


def _boilerplate(text: str, rng: random.Random) -> str:
    lines = text.strip("\n").split("\n")
    mirror = rng.choice(("docs.example.org", "manpages.example.net", "mirror.example.com"))
    head = f"Mirrored from {mirror} on 2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"
    foot = f"Served by {mirror}; report errors to webmaster@{mirror}"
    return "\n".join([head, *lines[1:-1], foot])


def _rewrap(text: str, rng: random.Random) -> str:
    width = rng.choice((60, 72, 100))
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in _paragraphs(text))


_PLANT = {"exact": lambda t, r: t, "edits": _edits, "reorder": _reorder,
          "boilerplate": _boilerplate, "rewrap": _rewrap}  # fmt: skip


def build(size: int, seed: int = 0, smoke: bool = False) -> list[Page]:
    """The pages in name order, each planted copy right after its original
    (``smoke``: of :func:`generated` pages)."""
    rng = random.Random(seed + 1)
    pages: list[Page] = []
    for i, (doc_id, text) in enumerate((generated if smoke else sources)(size, seed)):
        at = len(pages)
        pages.append(Page(doc_id, text, i, "", False))
        if i % PLANT_EVERY == 0:
            kind = KINDS[(i // PLANT_EVERY) % len(KINDS)]
            copy = _PLANT[kind](text, rng)
            pages.append(Page(f"{doc_id}#{kind}", copy, i, kind, False, at))
    return pages


# -- judging ------------------------------------------------------------------------------
def score(pages: Sequence[Page], pairs: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Recall per kind, and precision at the edge (:func:`benchmarks.judged.under_half`)."""
    found = {(min(i, j), max(i, j)) for i, j in pairs}
    kinds = Counter(p.kind for p in pages if p.kind)
    hit = Counter(p.kind for n, p in enumerate(pages) if p.kind and (p.original, n) in found)
    return {
        "recall": {k: hit[k] / kinds[k] for k in KINDS if kinds[k]},
        "recall_all": sum(hit.values()) / max(sum(kinds.values()), 1),
        "reported": len(found),
        "unplanted": sum(pages[i].family != pages[j].family for i, j in found),
    } | under_half(pages, list(found))


def fingerprinted(pages: Sequence[Page]) -> tuple[list[Page], np.ndarray, MinHashParams, str]:
    """The pages that have terms and their fingerprints, as a new index (default
    settings) makes them, with its LSH settings and scheme."""
    log(f"templated: {len(pages)} pages, fingerprints and sketches")
    with tempfile.TemporaryDirectory() as tmp, SimhashIndex.open(f"{tmp}/ix") as index:
        params, scheme = index.lsh, index.scheme.name
        assert params is not None
        fps, kept = [], []
        for p in pages:
            try:
                fps.append(index.fingerprint(p.text))
            except EmptyDocument:
                continue
            kept.append(p)
    return kept, np.array(fps, dtype=np.uint64), params, scheme


def run(mode: str, size: int | None = None) -> dict[str, Any]:
    """Both nets at the default settings, with the evidence and without it (the
    64-byte sketch alone, as indexes written before it), and the pigeonhole alone."""
    started = time.perf_counter()
    kept, fps, params, scheme = fingerprinted(build(size or MODES[mode], smoke=mode == "smoke"))
    result: dict[str, Any] = {
        "mode": mode,
        "pages": len(kept),
        "kinds": dict(Counter(p.kind for p in kept if p.kind)),
        "evidence_bins": params.evidence,
        "nets": {},
    }
    settings = {"both": params, NO_EVIDENCE_ROW: replace(params, evidence=0)}
    for name, lsh in settings.items():
        signed = sign(kept, fps, lsh)
        result["nets"][name] = score(kept, net_pairs(signed, "both", lsh, scheme))
    result["nets"]["simhash"] = score(kept, net_pairs(signed, "simhash", params, scheme))
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def render(r: dict[str, Any]) -> str:
    flag = "" if r["mode"] == "full" else f" --{r['mode']}"
    lines = [
        BEGIN,
        "## Templated English documentation",
        "",
        f"Generated by `python -m benchmarks.templated{flag}` ({r['seconds']} s): "
        f"{r['pages']} pages of documentation on this machine (manual pages, pydoc of "
        "the standard library's classes), taken in runs of consecutive names so that "
        "template siblings stay together, with planted copies "
        f"({', '.join(f'{k} {v}' for k, v in r['kinds'].items())}); how the set is "
        "built: `benchmarks/templated.py`. Under 0.5: reported pairs whose exact "
        "5-gram Jaccard is below 0.5 (under the threshold), as a share of all "
        f"reported pairs. Evidence: {r['evidence_bins']} bins (docs/nets.md).",
        "",
        "| nets | "
        + " | ".join(KINDS)
        + " | recall | missed at J >= 0.8 | reported | unplanted | under 0.5 |",
        "|---|" + "---|" * (len(KINDS) + 5),
    ]
    for name, s in r["nets"].items():
        lines.append(
            f"| {name} | "
            + " | ".join(_pct(s["recall"].get(k, 0.0)) for k in KINDS)
            + f" | **{_pct(s['recall_all'])}** | {len(s['missed_at_08'])} "
            f"| {s['reported']} | {s['unplanted']} "
            f"| **{s['under_half']} ({_pct(s['under_half_share'])})** |"
        )
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.templated", description=__doc__)
    ap.add_argument("--quick", action="store_true", help=f"{MODES['quick']} sources")
    ap.add_argument("--smoke", action="store_true", help=f"{MODES['smoke']} sources, no files")
    ap.add_argument("--size", type=int, help="sources (default: by mode)")
    ap.add_argument("--out", type=Path, help="write the JSON here instead")
    args = ap.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    result = run(mode, args.size)
    text = render(result)
    print(text)
    if mode == "smoke" and args.out is None:
        return 0
    out = args.out or RESULTS_DIR / f"templated{'' if mode == 'full' else '-' + mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    if mode == "full" and args.out is None:
        replace_section(text, BEGIN, END)
    return 0


def saved_section() -> str | None:
    """The section of the last full run, for benchmarks.eval to keep (as
    :func:`benchmarks.crawl.saved_section`)."""
    path = RESULTS_DIR / "templated.json"
    if path.exists():
        return render(json.loads(path.read_text(encoding="utf-8")))
    return committed_section(BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
