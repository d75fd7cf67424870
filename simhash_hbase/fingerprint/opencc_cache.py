"""OpenCC converters, loaded once per process and shared by SimHash and MinHash.

Loading one is not free (t2s ~29 M instructions, tw2sp ~45 M, ~0.1 of a one-shot
``shdb query``): the SimHash folding and the MinHash folding use the same
instances, and each is loaded on first use only.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import NamedTuple

from simhash_hbase.fingerprint.cache import cached


@cache
def converter(config: str) -> Callable[[str], str]:
    """OpenCC's ``config`` conversion; ImportError without OpenCC (each caller says
    what needs it)."""
    import opencc

    convert: Callable[[str], str] = opencc.OpenCC(config).convert
    return convert


#: Never passed over unconverted: OpenCC's UTF-8 encoding refuses lone surrogates, and
#: a line holding one is converted (and fails) as before.
_SURROGATES = "".join(map(chr, range(0xD800, 0xE000)))


class Screen(NamedTuple):
    """What :func:`screen` tells of OpenCC's conversion of a line."""

    #: A line holding none of these characters is left as it is.
    chars: str
    #: A line holding one of these characters is changed (a subset of ``chars``).
    certain: str


@cache
def screen(config: str) -> Screen | None:
    """Which lines OpenCC's ``config`` may change, and which it surely changes.

    OpenCC changes text only where one of its dictionary keys whose value differs
    from the key occurs (each stage of the config replaces matched keys by their
    values, and passes everything else through). So a set of characters holding at
    least one character of every such key (each one-character key, and for a longer
    key one of its characters) is a sound screen: a line without them needs no
    conversion. And a character that is a key, with a first value (the one OpenCC
    writes) other than itself, in every dictionary that has it as a key, and in no
    longer key, is replaced wherever it occurs: when every value has its key's length,
    the line is changed. Read from the config's dictionaries with OpenCC's
    ``opencc_dict`` (shipped with it), cached per user and per installed dictionaries;
    None when they cannot be read (then every line is converted, as without it).
    """
    import opencc

    share = Path(opencc.__file__).parent / "clib" / "share" / "opencc"
    tool = Path(opencc.__file__).parent / "clib" / "bin" / "opencc_dict"
    try:
        spec = (share / f"{config}.json").read_text("utf-8")
        files = sorted(set(re.findall(r'"file"\s*:\s*"([^"]+\.ocd2)"', spec)))
        stamps = [(share / f).stat() for f in files]
    except OSError:
        return None
    if not files or not tool.is_file():
        return None
    key = hashlib.sha256(spec.encode()).hexdigest()[:16] + "".join(
        f"-{st.st_ino}.{st.st_size}.{st.st_mtime_ns}" for st in stamps
    )
    found = cached(
        f"opencc-screen-{config}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.marshal",
        lambda: _read_screen(tool, [share / f for f in files]),
    )
    return None if found is None else Screen(*found)


def _entries(tool: Path, path: Path) -> list[tuple[str, list[str]]] | None:
    """(key, values) of an ocd2 dictionary, dumped by ``opencc_dict``; None if it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dict.txt"
        done = subprocess.run(
            [str(tool), "-i", str(path), "-o", str(out), "-f", "ocd2", "-t", "text"],
            capture_output=True, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not out.is_file():
            return None
        rows = (line.partition("\t") for line in out.read_text("utf-8").splitlines())
        return [(k, v.replace("\t", " ").split(" ")) for k, _, v in rows if k]


def _read_screen(tool: Path, dictionaries: list[Path]) -> tuple[str, str] | None:
    """The :class:`Screen` of these dictionaries (ocd2 files), as a tuple."""
    changing: set[str] = set()
    in_longer: set[str] = set()
    kept_somewhere: set[str] = set()
    same_length = True
    for path in dictionaries:
        entries = _entries(tool, path)
        if entries is None:
            return None
        for key, values in entries:
            if any(v != key for v in values):
                changing.add(key)
            if len(key) > 1:
                in_longer.update(key)
            elif values[0] == key:
                kept_somewhere.add(key)
            same_length = same_length and all(len(v) == len(key) for v in values)
    chars = {key for key in changing if len(key) == 1}
    chars.update(min(key) for key in changing if not chars.intersection(key))
    certain = chars - in_longer - kept_somewhere if same_length else set()
    return "".join(sorted(chars)) + _SURROGATES, "".join(sorted(certain))
