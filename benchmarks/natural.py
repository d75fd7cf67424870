"""Natural near-duplicates: pairs that occur in real data, not edits we made.

Two kinds, both labelled by exact character 4-shingle Jaccard like the rest of the
evaluation (a pair is a near-duplicate when its Jaccard exceeds ``EXCLUDE_JACCARD``,
the threshold that keeps such pairs out of the distinct set):

- **releases**: the same page as Debian ships it in two releases (bookworm, which
  the corpus comes from, and bullseye, fetched here with a private apt configuration
  under the corpus cache, never touching the system's). Translators fixed typos,
  updated options and versions, re-wrapped lines in between.
- **siblings**: distinct pages of one release whose Jaccard exceeds the threshold:
  pages sharing boilerplate, aliases of one command, a page and its near copy.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from . import corpus

OLD_SUITE = "bullseye"
#: Packages with Chinese pages in both releases (gimp-help-zh-cn is not in bullseye).
PACKAGES = (
    "manpages-zh",
    "debian-reference-zh-cn",
    "debian-reference-zh-tw",
    "maint-guide-zh-cn",
    "maint-guide-zh-tw",
)
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_MIRROR = "http://deb.debian.org/debian"


def _apt_options(root: Path) -> list[str]:
    return [
        f"-oDir::Etc::SourceList={root / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={root / 'lists'}",
        f"-oDir::Cache={root / 'cache'}",
        "-oAPT::Sandbox::User=root",
    ]


def _old_apt() -> list[str]:
    """apt options for the old suite; its package lists are fetched once."""
    root = corpus.CACHE / f"apt-{OLD_SUITE}"
    opts = _apt_options(root)
    if not (root / "lists" / "ready").exists():
        (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (root / "cache").mkdir(parents=True, exist_ok=True)
        (root / "sources.list").write_text(
            f"deb [signed-by={_KEYRING}] {_MIRROR} {OLD_SUITE} main\n", encoding="utf-8"
        )
        _run(["apt-get", "-q", *opts, "update"], root)
        (root / "lists" / "ready").touch()
    return opts


def _run(cmd: list[str], cwd: Path) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr.strip()}")


def _extract_old(package: str) -> Path:
    out = corpus.CACHE / f"{package}@{OLD_SUITE}.jsonl"
    if out.exists():
        return out
    opts = _old_apt()
    with tempfile.TemporaryDirectory() as tmp:
        _run(["apt-get", "-q", *opts, "download", package], Path(tmp))
        (deb,) = Path(tmp).glob(f"{package}_*.deb")
        root = Path(tmp) / "root"
        _run(["dpkg-deb", "-x", str(deb), str(root)], Path(tmp))
        partial = out.with_suffix(".tmp")
        with partial.open("w", encoding="utf-8") as f:
            for doc_id, text in corpus._documents(package, root):
                f.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
        partial.rename(out)
    return out


def _read(path: Path) -> dict[str, str]:
    with path.open(encoding="utf-8") as f:
        return {row["id"]: row["text"] for row in map(json.loads, f)}


def release_pairs(packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, str, str]]:
    """(page id, bookworm text, bullseye text) of every page whose text changed."""
    out = []
    for package in packages:
        new = _read(corpus._extract(package))
        old = _read(_extract_old(package))
        out += [(i, new[i], old[i]) for i in sorted(new.keys() & old.keys()) if new[i] != old[i]]
    return out
