"""The writer locks of an embedded index: ``flock``'d files in its folder.

LMDB serialises write transactions, but a check-and-add is a lookup (read
transactions) followed by a write, and two writers that both look up before
either writes both call the same text new. :class:`WriteSection` makes the
lookup and the write one critical section for every writer of the folder: a
lock of the handle's threads, then ``flock`` on ``shdb-write.lock`` (other
processes).

:class:`RunLock` is held by a whole writing job (an ingest run) under a key (its
checkpoint's digest) so that two runs of one input never share a checkpoint: the
second is refused, told the holder's pid, command and start time, which the
holder writes into ``shdb-run-KEY.lock`` (:class:`RunLocks`: one per key).

:class:`LeaseLock` is either lock where no process can hold a folder (HBase): a
meta row with the holder's record and a lease its holder renews, which a holder
that died stops renewing (``run-lock`` for a job, ``write-section`` for the
section, behind a lock of the handle's threads: :class:`LeaseSection`).

``flock`` locks go with their holder: a killed process leaves nothing to clear
(the file's stale content is overwritten by the next holder). Readers take
neither lock. A forked child closes its copies of the files, so it can never
keep its parent's lock alive.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

from simhash_hbase.errors import IndexBusy, StoreError
from simhash_hbase.store.base import Section, Store

WRITE_FILE = "shdb-write.lock"
_LOCK_NAME = re.compile(r"shdb-(write|run-[\w.-]+)\.lock")
_KEY = re.compile(r"[\w.-]{1,64}")


def is_lock_file(name: str) -> bool:
    """A writer lock's file of an index folder (never taken for foreign content)."""
    return _LOCK_NAME.fullmatch(name) is not None


_RELEASED: dict[str, Any] = {"free": True}


class _Locked:
    """A lock file opened on first use (a store that never writes creates none)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        _OPEN.add(self)

    def fd(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise StoreError(
                    f"cannot open the writer lock {self.path}: {exc.strerror}; writing the "
                    "index needs a folder this user may write"
                ) from exc
        return self._fd

    def close(self) -> None:
        """Close the file; in a forked child this leaves the parent's lock held."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_OPEN: weakref.WeakSet[_Locked] = weakref.WeakSet()


def _close_in_child() -> None:
    for lock in list(_OPEN):
        lock.close()


os.register_at_fork(after_in_child=_close_in_child)


class WriteSection(_Locked):
    """One check-and-add (or ingest batch) at a time among all writers of a folder.

    Reentrant in the thread that holds it: ``flock`` is taken by the outermost
    hold and released by it."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / WRITE_FILE)
        self._mutex = threading.RLock()
        self._depth = 0

    @contextmanager
    def held(self) -> Iterator[WriteSection]:
        """Held till the block ends (:meth:`Store.write_section`)."""
        with self._mutex:
            if self._depth == 0:
                fcntl.flock(self.fd(), fcntl.LOCK_EX)  # waits; the GIL is released
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fcntl.flock(self.fd(), fcntl.LOCK_UN)

    def kept(self) -> bool:
        """Always: ``flock`` is held till released, however long its holder stalls."""
        return True

    def close(self) -> None:
        with self._mutex:
            super().close()


class RunLock(_Locked):
    """The one writing job of a folder at a time (reentrant in the thread that
    holds it; another thread of the process is refused like another process)."""

    def __init__(self, folder: Path, key: str) -> None:
        super().__init__(folder / f"shdb-run-{key}.lock")
        self._mutex = threading.Lock()
        self._depth = 0
        self._owner: int | None = None

    @contextmanager
    def held(self, job: str, wait: float = 0.0) -> Iterator[None]:
        """Hold the folder for ``job``; another holder makes this wait up to
        ``wait`` seconds, then raise :class:`IndexBusy` naming it."""
        deadline, pause = time.monotonic() + wait, 0.01
        while not self._take(job):
            if time.monotonic() >= deadline:
                raise IndexBusy(str(self.path.parent), self.holder())
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        try:
            yield
        finally:
            with self._mutex:
                self._depth -= 1
                if self._depth == 0:
                    fcntl.flock(self.fd(), fcntl.LOCK_UN)

    def _take(self, job: str) -> bool:
        with self._mutex:
            if self._depth and self._owner != threading.get_ident():
                return False
            if self._depth == 0:
                try:
                    fcntl.flock(self.fd(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                os.ftruncate(self.fd(), 0)
                os.pwrite(self.fd(), _holder_record(job), 0)
                self._owner = threading.get_ident()
            self._depth += 1
            return True

    def holder(self) -> dict[str, Any]:
        """What the holder wrote about itself ({} if it has not yet)."""
        try:
            raw = os.pread(self.fd(), 4096, 0)
            value = json.loads(raw) if raw else {}
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}


def _holder_record(job: str) -> bytes:
    return json.dumps(_holder(job)).encode() + b"\n"


def _holder(job: str) -> dict[str, Any]:
    """What a run holding an index says about itself (:class:`IndexBusy` prints it)."""
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    command = " ".join(sys.argv)[:300]
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    return record | {"job": job, "command": command}


RUN_ROW = "run-lock/index"  # the meta row of an HBase index's whole-index job
SECTION_ROW = "write-section"  # the meta row of an HBase index's write section
LEASE_MS = 60_000  # a lease not renewed for this long was left by a run that died
#: Of a lease, what its holder counts as its own: the rest allows for the hosts'
#: clocks (a taker judges the holder's ``at`` by its own clock) and their rates.
_SURE = 5 / 6
SECTION_WAIT_S = 600.0  # a section held (and renewed) longer than this: IndexBusy


class LeaseLock:
    """The one writing job of an index that no process can hold (HBase), as
    :class:`RunLock` is for a folder: a checkAndPut of meta ``run-lock`` from
    absent, released or expired to the holder's record (pid, host, start time,
    command) and lease time; a thread renews the lease every third of
    ``LEASE_MS`` while the job runs, so a run killed without a word holds the index
    for a minute at most (not at all for a run on its host, which sees its pid is
    gone). The record says its ``lease``, by which a taker judges it. Reentrant in
    the thread that holds it; readers never look at it. Another ``row`` makes it
    another lock (:class:`LeaseSection`).

    A holder stalled past its lease (a pause, a frozen VM) may find it taken by
    another: :meth:`kept` says whether it is still its own."""

    def __init__(
        self, store: Store, row: str, lease_ms: int = LEASE_MS, most_pause: float = 1.0
    ) -> None:
        self._store, self._row, self._lease_ms = store, row, lease_ms
        self._most_pause = most_pause  # the longest wait between two tries
        self._mutex = threading.Lock()
        self._depth = 0
        self._owner: int | None = None
        self._mine: dict[str, Any] = {}
        self._seen: dict[str, Any] = {}  # the other holder's record, at the last try
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._until = 0.0  # (monotonic) till when no other can have taken this hold
        self._lost = False  # a renewal found the row another's: this hold was taken

    @contextmanager
    def held(self, job: str, wait: float = 0.0) -> Iterator[None]:
        """Hold the index for ``job``, waiting up to ``wait`` s for another holder,
        then raising :class:`IndexBusy` naming it."""
        deadline, pause = time.monotonic() + wait, min(0.05, self._most_pause / 10)
        while not self._take(job):
            if time.monotonic() >= deadline:
                lease_s = self._seen.get("lease", LEASE_MS) / 1000  # the holder's
                raise IndexBusy(self._store.url, self._seen, lease_s=lease_s)
            time.sleep(pause)
            pause = min(pause * 2, self._most_pause)
        try:
            yield
        finally:
            self._release()

    def _take(self, job: str) -> bool:
        with self._mutex:
            if self._depth:
                if self._owner != threading.get_ident():
                    return False
                self._depth += 1
                return True
            sent, now = time.monotonic(), int(time.time() * 1000)
            token = os.urandom(8).hex()
            mine = _holder(job) | {"at": now, "token": token, "lease": self._lease_ms}
            # a free row (the usual case, one writer): one checkAndPut, no read first
            if self._store.swap_meta([(self._row, _RELEASED, mine)])[0]:
                return self._took(mine, sent)
            held = self._store.get_meta(self._row)
            if held == mine:  # the checkAndPut's reply was lost (HBase): it was written
                return self._took(mine, sent)
            if (
                held is not None
                and held != self._mine  # this lock's last hold, whose release was lost
                and not held.get("free")
                and now - held.get("at", 0) < held.get("lease", LEASE_MS)
                and not _ended(held)
            ):
                self._seen = held
                return False
            (ok,) = self._store.swap_meta([(self._row, held, mine)])
            if not ok and self._store.get_meta(self._row) != mine:  # another run was first
                self._seen = self._store.get_meta(self._row) or {}
                return False
            return self._took(mine, sent)

    def _took(self, mine: dict[str, Any], sent: float) -> bool:
        self._mine, self._depth, self._owner = mine, 1, threading.get_ident()
        self._until, self._lost = sent + self._lease_ms * _SURE / 1000, False
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="shdb-lease", daemon=True)
        self._renewer.start()
        return True

    def close(self) -> None:
        """Nothing is held open: the lock is a row of meta."""

    def kept(self) -> bool:
        """Whether this hold is still its holder's alone: no other can have taken
        it since it was taken. No round trip while the lease has half of it left
        (the renewing thread keeps it so); else one renewal, which says. A holder
        that was stalled past its lease and whose row another took gets False (and
        so does every later call of this hold)."""
        with self._mutex:
            if self._lost:
                return False
            if time.monotonic() < self._until - self._lease_ms / 3000:
                return True
            return self._renewed()

    def _renew(self) -> None:
        while not self._stop.wait(self._lease_ms / 3000):
            with self._mutex, suppress(StoreError):  # a hiccup: the next round tries again
                if not self._lost:
                    self._renewed()

    def _renewed(self) -> bool:
        """Renew the lease (under the mutex): False if the row is no longer this
        hold's (another holder's, or free: taken and released meanwhile)."""
        sent = time.monotonic()
        renewed = self._mine | {"at": int(time.time() * 1000)}
        if not self._store.swap_meta([(self._row, self._mine, renewed)])[0]:
            held = self._store.get_meta(self._row)
            # the token is this hold's alone: a row holding it was never taken
            if held is None or held.get("token") != self._mine["token"]:
                self._lost = True
                return False
            if held != renewed:  # an earlier renewal's reply was lost: it was written
                (ok,) = self._store.swap_meta([(self._row, held, renewed)])
                if not ok and self._store.get_meta(self._row) != renewed:
                    self._lost = True
                    return False
        self._mine, self._until = renewed, sent + self._lease_ms * _SURE / 1000
        return True

    def _release(self) -> None:
        with self._mutex:
            self._depth -= 1
            if self._depth:
                return
            self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._mutex:
            if self._depth == 0:
                self._owner = None
                # the store gone (the error being raised says so): the lease ends by itself
                with suppress(StoreError):
                    self._store.swap_meta([(self._row, self._mine, _RELEASED)])


def _ended(holder: dict[str, Any]) -> bool:
    """A holder on this host whose process is gone (a run killed, or its store
    killed under it): its lease need not run out before a re-run resumes."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return False  # another handle of this process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


class LeaseSection:
    """:meth:`Store.write_section` where no process can hold a folder (HBase): the
    handle's threads queue on a lock, then the holder takes the meta row
    ``write-section`` (a :class:`LeaseLock`: a writer killed in it holds it a
    minute at most, not at all for a writer on its host). Reentrant in its
    thread. One writer pays two ``checkAndPut`` calls a section (docs/SPEC.md,
    "Concurrent writers"). The hold is a :class:`~simhash_hbase.store.base.Section`:
    a writer stalled past the lease learns that it lost it (:meth:`LeaseLock.kept`)."""

    def __init__(self, store: Store, lease_ms: int = LEASE_MS) -> None:
        self._threads = threading.RLock()
        self._lease = LeaseLock(store, SECTION_ROW, lease_ms, most_pause=0.05)

    @contextmanager
    def held(self, wait: float = SECTION_WAIT_S) -> Iterator[Section]:
        with self._threads, self._lease.held("write section", wait):
            yield self._lease


class RunLocks:
    """A store's run locks by key (:meth:`Store.run_lock`), each made on first use
    (``make``: a :class:`RunLock` of the folder, or a :class:`LeaseLock` row)."""

    def __init__(self, make: Callable[[str], RunLock | LeaseLock]) -> None:
        self._make = make
        self._locks: dict[str, RunLock | LeaseLock] = {}
        self._mutex = threading.Lock()

    def held(self, job: str, wait: float, key: str) -> AbstractContextManager[None]:
        if _KEY.fullmatch(key) is None:
            raise ValueError(f"a run lock's key is letters, digits, _ . or -: {key!r}")
        with self._mutex:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = self._make(key)
        return lock.held(job, wait)

    def close(self) -> None:
        with self._mutex:
            for lock in self._locks.values():
                lock.close()
