"""simhash-hbase: near-duplicate text search with 64-bit SimHash and a pigeonhole index.

The names below are loaded on first use (PEP 562): ``import simhash_hbase.records``
or ``shdb --help`` does not pay for NumPy, the segmenter or a store.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from simhash_hbase.version import __version__

if TYPE_CHECKING:
    from simhash_hbase.errors import (
        EmptyDocument,
        IndexBusy,
        IndexNotFound,
        InvalidIndexUrl,
        InvalidInput,
        InvalidQuery,
        InvalidSetting,
        ManifestMismatch,
        NotAuthenticated,
        ShdbError,
        StoreError,
        StoreUnavailable,
    )
    from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams, hamming
    from simhash_hbase.index.client import SimhashIndex
    from simhash_hbase.index.remote import RemoteIndex
    from simhash_hbase.layout.scheme import SCHEMES, Scheme
    from simhash_hbase.layout.window import Window
    from simhash_hbase.records import (
        BadRecord,
        Document,
        Duplicate,
        IngestSummary,
        Match,
        OnError,
        Problem,
        Record,
    )
    from simhash_hbase.text.extract import to_text

#: Where each public name lives.
_HOMES = {
    "simhash_hbase.errors": (
        "EmptyDocument",
        "IndexBusy",
        "IndexNotFound",
        "InvalidIndexUrl",
        "InvalidInput",
        "InvalidQuery",
        "InvalidSetting",
        "ManifestMismatch",
        "NotAuthenticated",
        "ShdbError",
        "StoreError",
        "StoreUnavailable",
    ),
    "simhash_hbase.fingerprint.simhash": ("Fingerprinter", "FingerprintParams", "hamming"),
    "simhash_hbase.index.client": ("SimhashIndex",),
    "simhash_hbase.index.remote": ("RemoteIndex",),
    "simhash_hbase.layout.scheme": ("SCHEMES", "Scheme"),
    "simhash_hbase.layout.window": ("Window",),
    "simhash_hbase.text.extract": ("to_text",),
    "simhash_hbase.records": (
        "BadRecord",
        "Document",
        "Duplicate",
        "IngestSummary",
        "Match",
        "OnError",
        "Problem",
        "Record",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'simhash_hbase' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "SCHEMES",
    "BadRecord",
    "Document",
    "Duplicate",
    "EmptyDocument",
    "FingerprintParams",
    "Fingerprinter",
    "IndexBusy",
    "IndexNotFound",
    "IngestSummary",
    "InvalidIndexUrl",
    "InvalidInput",
    "InvalidQuery",
    "InvalidSetting",
    "ManifestMismatch",
    "Match",
    "NotAuthenticated",
    "OnError",
    "Problem",
    "Record",
    "RemoteIndex",
    "Scheme",
    "ShdbError",
    "SimhashIndex",
    "StoreError",
    "StoreUnavailable",
    "Window",
    "__version__",
    "hamming",
    "to_text",
]
