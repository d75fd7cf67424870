"""One exception root, so callers (and the CLI) catch ``ShdbError`` once."""

from __future__ import annotations


class ShdbError(Exception):
    """Root of every error this package raises on purpose."""

    exit_code = 2


class InvalidInput(ShdbError):
    """A record, argument or file the user gave cannot be used as it is."""


class EmptyDocument(InvalidInput):
    """The text has no usable terms; a fingerprint of 0 would match garbage."""


class InvalidQuery(InvalidInput):
    """A query that cannot be answered exactly, e.g. k above the scheme's k."""


class InvalidIndexUrl(InvalidInput):
    """The index URL names no store we know, or is malformed."""


class ManifestMismatch(ShdbError):
    """The index was built with other fingerprint parameters or another scheme."""


class StoreError(ShdbError):
    """The backing store failed (corrupt file, refused write, server error)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached at all (HBase down, wrong host or port)."""


class StoreCorrupt(StoreError):
    """Stored bytes cannot be read back: a damaged, truncated or foreign file or row."""


class StoreClosed(StoreError):
    """The store was used after ``close()``."""
