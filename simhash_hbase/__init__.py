"""simhash-hbase: near-duplicate text search with 64-bit SimHash and a pigeonhole index."""

from .errors import (
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
from .fingerprint import Fingerprinter, FingerprintParams, hamming
from .index import SimhashIndex
from .records import (
    BadRecord,
    Document,
    Duplicate,
    IngestSummary,
    Match,
    OnError,
    Problem,
    Record,
)
from .scheme import SCHEMES, Scheme
from .version import __version__

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
