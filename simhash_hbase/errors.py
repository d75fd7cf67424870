"""One exception root, so callers (and the CLI) catch ``ShdbError`` once.

Messages say what went wrong and where, in the library's terms. What to type
next (a flag, a script) is the CLI's business: it reads the structured fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ShdbError(Exception):
    """Root of every error this package raises on purpose."""

    exit_code = 2


class InvalidInput(ShdbError):
    """A record, argument or file the user gave cannot be used as it is."""


class RejectedRecord(InvalidInput):
    """A bad record stopped an ingest that was asked to stop at the first one."""

    def __init__(self, where: str, reason: str, problem: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason, self.problem = where, reason, problem


class EmptyDocument(InvalidInput):
    """The text has no usable terms; a fingerprint of 0 would match garbage."""


class BatchRefused(InvalidInput):
    """Items of one batch call that cannot be indexed as they are; NOTHING of the batch
    was written, so sending the others again gives their true answers (a good item
    written beside a bad one would find itself on that retry: "not new").
    ``refused`` maps each bad item's position in the batch to its error."""

    def __init__(self, refused: Mapping[int, ShdbError], size: int) -> None:
        first = min(refused)
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        super().__init__(
            f"{len(refused)} of {size} items refused, nothing written: item {first}: "
            f"{refused[first]}{more}; send the others again without them"
        )
        self.refused, self.size = dict(refused), size


class InvalidQuery(InvalidInput):
    """A query that cannot be answered exactly, e.g. k above the scheme's k."""

    def __init__(self, message: str, *, k: int | None = None, max_k: int | None = None) -> None:
        super().__init__(message)
        self.k, self.max_k = k, max_k


class InvalidSetting(InvalidInput):
    """A setting (``setting`` names the parameter) outside what it can be."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


class InvalidIndexUrl(InvalidInput):
    """The index URL names no store we know, or is malformed."""


class IndexNotFound(InvalidIndexUrl):
    """Nothing at the URL, and the caller asked not to create an index there."""

    def __init__(self, url: str) -> None:
        super().__init__(f"no index at {url}")
        self.url = url


class ManifestMismatch(ShdbError):
    """The index was built with other settings; ``differences`` lists them as
    (setting, value in the index, value asked for)."""

    def __init__(self, url: str, differences: list[tuple[str, Any, Any]]) -> None:
        lines = "\n  ".join(
            f"{name}: the index has {held!r}, asked for {wanted!r}"
            for name, held, wanted in differences
        )
        super().__init__(f"the index at {url} was built with other settings:\n  {lines}")
        self.url = url
        self.differences = differences


class StoreError(ShdbError):
    """The backing store failed (corrupt file, refused write, server error)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached at all (HBase down, wrong host or port).

    ``answered`` says what answered on the port when it was not the store (e.g.
    ``"an HTTP server"``), so that the CLI's hint is about the port, not about
    starting HBase; None when nothing answered.
    """

    def __init__(self, message: str, *, answered: str | None = None) -> None:
        super().__init__(message)
        self.answered = answered


class NotAuthenticated(StoreUnavailable):
    """The store requires credentials this process lacks or that it refused (no
    Kerberos ticket, an expired one, a wrong principal): the fix is the user's
    (``kinit``, the URL's ``sasl=``), not a restart of the store."""


class StoreCorrupt(StoreError):
    """Stored bytes cannot be read back: a damaged, truncated or foreign file or row."""


class IndexBusy(StoreError):
    """Another writing job (an ingest) holds the index; ``holder`` is what it wrote
    about itself (pid, host, job, command, start time; empty if not yet written)."""

    def __init__(self, url: str, holder: dict[str, Any], *, lease_s: float | None = None) -> None:
        stopped = (
            "a stopped run leaves no lock"
            if lease_s is None
            else f"a run killed on another host holds it {lease_s:.0f} s after its last renewal"
        )
        who = (
            f"pid {holder.get('pid')} on {holder.get('host')} ({holder.get('job')}, started "
            f"{holder.get('started')}: {holder.get('command')})"
            if holder
            else "a process that is starting"
        )
        super().__init__(
            f"the index at {url} is being written by {who}; one writing job at a time "
            "keeps checkpoints and reports whole: wait for it to finish (--wait), or stop "
            f"it ({stopped}). Queries and serve's reads are not blocked"
        )
        self.url, self.holder = url, holder


class StoreClosed(StoreError):
    """The store was used after ``close()``."""


class WorkerDied(ShdbError):
    """A fingerprinting worker process died (or a text raised in it) while it held
    text ``item`` of chunk ``chunk``; ``document`` names it once the caller knows."""

    def __init__(self, chunk: int, item: int, how: str, document: str | None = None) -> None:
        held = document or f"text {item} of chunk {chunk}"
        super().__init__(
            f"a fingerprinting worker {how} while it held {held}; the batches before it are saved"
        )
        self.chunk, self.item, self.how, self.document = chunk, item, how, document

    def naming(self, document: str) -> WorkerDied:
        """The same error, naming the document (its id and file:line)."""
        return WorkerDied(self.chunk, self.item, self.how, document)
