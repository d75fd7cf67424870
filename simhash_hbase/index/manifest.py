"""The index manifest: the settings that make fingerprints comparable.

Stored with the index as JSON (docs/SPEC.md, "Manifest"): embedded, key
``manifest`` of the ``meta`` database; HBase, row ``manifest`` of
``<prefix>_meta``, column ``m:json``. It is written once, only if absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from simhash_hbase.errors import ManifestMismatch
from simhash_hbase.fingerprint.minhash import MinHashParams
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.layout.nets import DEFAULT_NETS, SIMHASH, SIMHASH_LSH, check_nets
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, Scheme, get_scheme
from simhash_hbase.version import __version__

FORMAT_VERSION = 1
#: Format 2 is format 1 with the HBase bucket layout (``hbase_index``, docs/SPEC.md).
FORMAT_VERSIONS = (1, 2)
MANIFEST = "manifest"  # its name in the meta table
#: What the installed code brings rather than the caller: checked when texts are
#: fingerprinted (loading them costs a second), not on every open.
ENVIRONMENT = ("tokenizer_version", "idf_digest", "stopwords_digest", "fold_converter")

#: Settings asked for: a full FingerprintParams, or only the fields given.
Wanted = FingerprintParams | Mapping[str, Any] | None


def _fields(wanted: Wanted) -> dict[str, Any]:
    if wanted is None:
        return {}
    return asdict(wanted) if isinstance(wanted, FingerprintParams) else dict(wanted)


def validate(scheme_name: str | None, wanted: Wanted) -> tuple[Scheme, FingerprintParams]:
    """The settings of a new index (defaults for those not given); cheap, so that
    every setting is checked before anything is opened or written."""
    return get_scheme(scheme_name or DEFAULT_SCHEME), FingerprintParams(**_fields(wanted))


def new_manifest(
    scheme_name: str | None, wanted: Wanted, nets: str | None = None
) -> dict[str, Any]:
    """The manifest of a new index (both nets unless ``nets`` says otherwise)."""
    scheme, params = validate(scheme_name, wanted)
    manifest = {
        "format_version": FORMAT_VERSION,
        "scheme": scheme.name,
        "fingerprint": params.to_manifest(),
        "created_by": f"simhash-hbase {__version__}",
        "nets": check_nets(nets or DEFAULT_NETS),
    }
    if manifest["nets"] == SIMHASH_LSH:
        manifest["lsh"] = MinHashParams().to_manifest()
    return manifest


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
    if manifest.get("format_version") not in FORMAT_VERSIONS:
        raise ManifestMismatch(
            url, [("format_version", manifest.get("format_version"), FORMAT_VERSION)]
        )
    held = FingerprintParams.from_manifest(manifest["fingerprint"])
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
