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


@cache
def witnesses(config: str) -> str | None:
    """Characters such that OpenCC's ``config`` leaves any text holding none of them as it is.

    OpenCC changes text only where one of its dictionary keys whose value differs
    from the key occurs (each stage of the config replaces matched keys by their
    values, and passes everything else through). So a set of characters holding at
    least one character of every such key (each one-character key, and for a longer
    key one of its characters) is a sound screen: a text or line without them needs no
    conversion. Read from the config's dictionaries with OpenCC's ``opencc_dict``
    (shipped with it), cached per user and per installed dictionaries; None when they
    cannot be read (then every text is converted, as without the screen).
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
    found: str | None = cached(
        f"opencc-witnesses-{config}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.marshal",
        lambda: _read_witnesses(tool, [share / f for f in files]),
    )
    return found


def _read_witnesses(tool: Path, dictionaries: list[Path]) -> str | None:
    """The screen of :func:`witnesses` for these dictionaries (ocd2 files)."""
    changing: set[str] = set()
    for path in dictionaries:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "dict.txt"
            done = subprocess.run(
                [str(tool), "-i", str(path), "-o", str(out), "-f", "ocd2", "-t", "text"],
                capture_output=True, check=False,
            )  # fmt: skip
            if done.returncode != 0 or not out.is_file():
                return None
            for line in out.read_text("utf-8").splitlines():
                key, _, values = line.partition("\t")
                if key and any(v != key for v in values.replace("\t", " ").split(" ")):
                    changing.add(key)
    chars = {key for key in changing if len(key) == 1}
    chars.update(min(key) for key in changing if not chars.intersection(key))
    return "".join(sorted(chars)) + _SURROGATES
