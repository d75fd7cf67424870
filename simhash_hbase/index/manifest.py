"""The index manifest: the settings that make fingerprints comparable.

Stored with the index as JSON (docs/SPEC.md, "Manifest"): embedded, key
``manifest`` of the ``meta`` database; HBase, row ``manifest`` of
``<prefix>_meta``, column ``m:json``. It is written once, only if absent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, TypeVar

from simhash_hbase.errors import InvalidSetting, ManifestMismatch, StoreCorrupt, StoreError
from simhash_hbase.fingerprint.minhash import MinHashParams, check_similarity
from simhash_hbase.fingerprint.simhash import FingerprintParams, idf_table, register_idf
from simhash_hbase.layout import codec
from simhash_hbase.layout.codec import RETAIN
from simhash_hbase.layout.nets import DEFAULT_NETS, NETS, SIMHASH, SIMHASH_LSH, check_nets
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, SCHEMES, Scheme, get_scheme
from simhash_hbase.store.base import Store
from simhash_hbase.store.hbase.settings import LAYOUTS
from simhash_hbase.version import __version__

_T = TypeVar("_T")

FORMAT_VERSION = 1
#: Format 2 is format 1 with the HBase bucket layout (``hbase_index``, docs/SPEC.md).
FORMAT_VERSIONS = (1, 2)
MANIFEST = "manifest"  # its name in the meta table
_IDF = "idf/"  # custom IDF tables, by digest
#: The longest retention: HBase keeps it as a column family's TTL, an i32 of seconds.
MAX_RETAIN_S = 2**31 - 1
#: What the installed code brings rather than the caller: checked when texts are
#: fingerprinted (loading them costs a second), not on every open.
ENVIRONMENT = ("tokenizer_version", "idf_digest", "stopwords_digest", "fold_converter")

#: Settings asked for: a full FingerprintParams, or only the fields given.
Wanted = FingerprintParams | Mapping[str, Any] | None


def _fields(wanted: Wanted) -> dict[str, Any]:
    if wanted is None:
        return {}
    return asdict(wanted) if isinstance(wanted, FingerprintParams) else dict(wanted)


def validate(
    scheme_name: str | None,
    wanted: Wanted,
    similarity: float | None = None,
    retain: int | None = None,
) -> tuple[Scheme, FingerprintParams]:
    """The settings of a new index (defaults for those not given); cheap, so that
    every setting is checked before anything is opened or written."""
    if similarity is not None:
        check_similarity(similarity)
    if retain is not None:
        check_retain(retain)
    return get_scheme(scheme_name or DEFAULT_SCHEME), FingerprintParams(**_fields(wanted))


def new_manifest(
    scheme_name: str | None,
    wanted: Wanted,
    nets: str | None = None,
    similarity: float | None = None,
    retain: int | None = None,
) -> dict[str, Any]:
    """The manifest of a new index (both nets unless ``nets`` says otherwise); its
    default ``similarity`` is ``lsh.threshold`` (with its floor; docs/nets.md);
    ``retain``: its retention in seconds (docs/lifecycle.md), none if None."""
    scheme, params = validate(scheme_name, wanted)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "scheme": scheme.name,
        "fingerprint": params.to_manifest(),
        "created_by": f"simhash-hbase {__version__}",
        "nets": check_nets(nets or DEFAULT_NETS),
    }
    lsh = MinHashParams()
    if similarity is not None:
        if manifest["nets"] != SIMHASH_LSH:
            raise InvalidSetting(
                "similarity",
                "a similarity needs sketches: an index of the pigeonhole net only "
                f"(nets: {SIMHASH}) has none; leave out one of nets and similarity",
            )
        lsh = lsh.at_similarity(similarity)
    if manifest["nets"] == SIMHASH_LSH:
        manifest["lsh"] = lsh.to_manifest()
    if retain is not None:
        manifest[RETAIN] = check_retain(retain)
    return manifest


def check_retain(retain: int) -> int:
    """A retention in whole seconds, over 0 and at most what HBase's TTL holds."""
    if isinstance(retain, bool) or not isinstance(retain, int) or not 0 < retain <= MAX_RETAIN_S:
        raise InvalidSetting(
            "retain",
            f"a retention is whole seconds over 0, at most {MAX_RETAIN_S}; got {retain!r:.40}",
        )
    return retain


def retain_of(manifest: dict[str, Any], url: str, retain: int | None) -> int | None:
    """The index's retention in seconds (None: it keeps every document, as every index
    created without one); ``retain`` given must be the index's: a retention is set
    when an index is created (on HBase it is the tables' TTL), never changed."""
    held: int | None = manifest.get(RETAIN)
    if retain is not None and check_retain(retain) != held:
        raise InvalidSetting(
            "retain",
            f"the index at {url} was created with "
            + ("no retention" if held is None else f"a retention of {held} s")
            + f", not {retain} s: a retention is set when an index is created; to keep "
            "another span, ingest into a new index created with that --retain",
        )
    return held


def nets_of(manifest: dict[str, Any], url: str, nets: str | None) -> MinHashParams | None:
    """The LSH settings of an index (None: the pigeonhole only, as every index
    written before nets existed); ``nets`` given must be the index's."""
    held = manifest.get("nets", SIMHASH)
    if nets is not None and check_nets(nets) != held:
        raise ManifestMismatch(url, [("nets", held, nets)])
    return MinHashParams.from_manifest(manifest["lsh"]) if held == SIMHASH_LSH else None


def check_lsh_environment(manifest: dict[str, Any], lsh: MinHashParams, url: str) -> None:
    """The installed converter is the one the index's sketches were folded with."""
    stored, current = manifest["lsh"].get("fold_converter"), lsh.to_manifest().get("fold_converter")
    if stored != current:
        raise ManifestMismatch(url, [("lsh.fold_converter", stored, current)])


def settle(
    manifest: dict[str, Any], url: str, scheme_name: str | None, wanted: Wanted
) -> tuple[Scheme, FingerprintParams]:
    """The scheme and params an index was built with; every setting the caller
    gave must equal them (:class:`ManifestMismatch` lists those that do not)."""
    held = check_manifest(manifest, url)
    diffs = [
        (name, getattr(held, name), value)
        for name, value in _fields(wanted).items()
        if getattr(held, name) != value
    ]
    if scheme_name is not None and scheme_name != manifest["scheme"]:
        diffs.insert(0, ("scheme", manifest["scheme"], scheme_name))
    if diffs:
        raise ManifestMismatch(url, diffs)
    return get_scheme(manifest["scheme"]), held


def check_environment(manifest: dict[str, Any], params: FingerprintParams, url: str) -> None:
    """The installed tokenizer, IDF table and stop words are those of the index."""
    stored, current = manifest["fingerprint"], params.to_manifest()
    diffs = [
        (k, stored.get(k), current.get(k)) for k in ENVIRONMENT if stored.get(k) != current.get(k)
    ]
    if diffs:
        raise ManifestMismatch(url, diffs)


_FIX = "restore the manifest from a backup, or ingest the documents into a new index"


def _refuse(url: str, field: str, found: object, why: str, fix: str = _FIX) -> StoreCorrupt:
    shown = repr(found) if len(repr(found)) <= 80 else f"{repr(found)[:77]}..."
    return StoreCorrupt(
        f"the index at {url} has a manifest this shdb cannot use: {field} = {shown}: {why}; "
        f"nothing was written: {fix}"
    )


def read_manifest(store: Store) -> dict[str, Any] | None:
    """The index's stored manifest (None: none yet); one that is not a JSON object
    is a :class:`StoreCorrupt` naming the index."""
    try:
        return store.get_meta(MANIFEST)
    except StoreCorrupt as exc:
        raise StoreCorrupt(
            f"the manifest of the index at {store.url} cannot be read: {exc}; {_FIX}"
        ) from exc


def check_manifest(manifest: object, url: str) -> FingerprintParams:
    """Every field of a stored manifest (hand-edited, damaged, or written by a newer
    shdb) checked before anything is written to its index; a problem is a
    :class:`StoreCorrupt` naming the field, what was found and what to do."""
    if not isinstance(manifest, dict):
        raise _refuse(url, "manifest", manifest, "not a JSON object")
    version = manifest.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _refuse(url, "format_version", version, "missing or not an integer")
    if version > max(FORMAT_VERSIONS):
        raise _refuse(
            url, "format_version", version,
            f"written by a newer shdb (format_version {version}; this shdb reads up to "
            f"{max(FORMAT_VERSIONS)})", "upgrade shdb",
        )  # fmt: skip
    if version not in FORMAT_VERSIONS:
        raise _refuse(url, "format_version", version, f"unknown; one of {FORMAT_VERSIONS}")
    scheme = manifest.get("scheme")
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise _refuse(url, "scheme", scheme, f"missing or unknown; one of {', '.join(SCHEMES)}")
    nets = manifest.get("nets", SIMHASH)
    if not isinstance(nets, str) or nets not in NETS:
        raise _refuse(url, "nets", nets, f"unknown; one of {', '.join(NETS)}")
    layout = manifest.get("hbase_index", LAYOUTS[0])
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise _refuse(url, "hbase_index", layout, f"unknown; one of {', '.join(LAYOUTS)}")
    if nets == SIMHASH_LSH:
        _parsed(url, "lsh", manifest.get("lsh"), MinHashParams.from_manifest)
    if RETAIN in manifest:
        try:
            check_retain(manifest[RETAIN])
        except InvalidSetting as exc:
            raise _refuse(url, RETAIN, manifest[RETAIN], str(exc)) from exc
    return _parsed(url, "fingerprint", manifest.get("fingerprint"), FingerprintParams.from_manifest)


def _parsed(url: str, field: str, entry: object, parse: Callable[[dict[str, Any]], _T]) -> _T:
    """``entry`` read by ``parse``: an object whose settings are all valid."""
    if not isinstance(entry, dict):
        raise _refuse(url, field, entry, "missing or not a JSON object")
    for key in (*ENVIRONMENT, "idf", "idf_name", "idf_digest", "hash", "tokenizer"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise _refuse(url, f"{field}.{key}", value, "not a string")
    try:
        return parse(entry)
    except InvalidSetting as exc:
        raise _refuse(url, f"{field}.{exc.setting}", entry.get(exc.setting), str(exc)) from exc
    except (TypeError, ValueError, KeyError) as exc:  # a value of the wrong JSON type
        raise _refuse(url, field, entry, f"cannot be read ({exc})") from exc


def store_manifest(
    store: Store,
    scheme: str | None,
    params: Wanted,
    nets: str | None,
    similarity: float | None = None,
    retain: int | None = None,
) -> dict[str, Any]:
    """Write a new index's manifest (its settings validated before: :func:`validate`)
    and its custom IDF table, which travels with the index (no later ``--idf``),
    unless another process was first; the manifest held after."""
    manifest = new_manifest(scheme, params, nets, similarity, retain) | store.manifest_entries()
    digest = FingerprintParams.from_manifest(manifest["fingerprint"]).idf
    if digest is not None:
        parts = codec.encode_blob_parts(idf_table(digest).raw)
        for i, part in enumerate(parts):
            store.put_meta(f"{_IDF}{digest}/{i}", part)
        store.put_meta(f"{_IDF}{digest}", {"parts": len(parts)})
    return store.put_meta_if_absent(MANIFEST, manifest)


def drop_manifest(store: Store, digest: str | None) -> None:
    """Delete what :func:`store_manifest` wrote: the manifest and the IDF table ``digest``."""
    if digest is not None:
        head = store.get_meta(f"{_IDF}{digest}") or {}
        for i in range(int(head.get("parts", 0))):
            store.delete_meta(f"{_IDF}{digest}/{i}")
        store.delete_meta(f"{_IDF}{digest}")
    store.delete_meta(MANIFEST)


def load_idf(store: Store, digest: str | None, url: str) -> None:
    """Register the index's own custom IDF table, read from its meta table."""
    if digest is None:
        return
    head = store.get_meta(f"{_IDF}{digest}")
    if head is None:
        raise StoreError(f"the IDF table {digest[:12]}... of {url} is missing")
    parts = []
    for i in range(head["parts"]):
        part = store.get_meta(f"{_IDF}{digest}/{i}")
        if part is None:
            raise StoreError(f"the IDF table {digest[:12]}... of {url} is incomplete")
        parts.append(part)
    table = register_idf(codec.decode_blob_parts(parts), f"IDF table of {url}")
    if table.digest != digest:
        raise StoreError(f"the IDF table {digest[:12]}... of {url} is corrupt")
