"""OpenCC converters, loaded once per process and shared by SimHash and MinHash.

Loading one is not free (t2s ~29 M instructions, tw2sp ~45 M, ~0.1 of a one-shot
``shdb query``): the SimHash folding and the MinHash folding use the same
instances, and each is loaded on first use only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache


@cache
def converter(config: str) -> Callable[[str], str]:
    """OpenCC's ``config`` conversion; ImportError without OpenCC (each caller says
    what needs it)."""
    import opencc

    convert: Callable[[str], str] = opencc.OpenCC(config).convert
    return convert
