"""simhash-hbase: near-duplicate text search with 64-bit SimHash and a pigeonhole index."""

from simhash_hbase.errors import (
    EmptyDocument,
    IndexNotFound,
    InvalidIndexUrl,
    InvalidInput,
    InvalidQuery,
    InvalidSetting,
    ManifestMismatch,
    ShdbError,
    StoreError,
    StoreUnavailable,
)
from simhash_hbase.fingerprint.simhash import Fingerprinter, FingerprintParams, hamming
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.layout.scheme import SCHEMES, Scheme
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
from simhash_hbase.version import __version__

__all__ = [
    "SCHEMES",
    "BadRecord",
    "Document",
    "Duplicate",
    "EmptyDocument",
    "FingerprintParams",
    "Fingerprinter",
    "IndexNotFound",
    "IngestSummary",
    "InvalidIndexUrl",
    "InvalidInput",
    "InvalidQuery",
    "InvalidSetting",
    "ManifestMismatch",
    "Match",
    "OnError",
    "Problem",
    "Record",
    "Scheme",
    "ShdbError",
    "SimhashIndex",
    "StoreError",
    "StoreUnavailable",
    "__version__",
    "hamming",
]
