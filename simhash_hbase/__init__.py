"""simhash-hbase: near-duplicate text search with 64-bit SimHash and a pigeonhole index."""

from .errors import (
    EmptyDocument,
    InvalidIndexUrl,
    InvalidInput,
    InvalidQuery,
    ManifestMismatch,
    ShdbError,
    StoreError,
    StoreUnavailable,
)
from .fingerprint import Fingerprinter, FingerprintParams, hamming
from .index import BadRecord, Duplicate, IngestSummary, Record, SimhashIndex
from .records import Document, Match
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
    "IngestSummary",
    "InvalidIndexUrl",
    "InvalidInput",
    "InvalidQuery",
    "ManifestMismatch",
    "Match",
    "Record",
    "Scheme",
    "ShdbError",
    "SimhashIndex",
    "StoreError",
    "StoreUnavailable",
    "__version__",
    "hamming",
]
