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
from simhash_hbase.fingerprint.simhash import FingerprintParams
from simhash_hbase.layout.scheme import DEFAULT_SCHEME, Scheme, get_scheme
from simhash_hbase.version import __version__

FORMAT_VERSION = 1
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


def new_manifest(scheme_name: str | None, wanted: Wanted) -> dict[str, Any]:
    """The manifest of a new index."""
    scheme, params = validate(scheme_name, wanted)
    return {
        "format_version": FORMAT_VERSION,
        "scheme": scheme.name,
        "fingerprint": params.to_manifest(),
        "created_by": f"simhash-hbase {__version__}",
    }


def settle(
    manifest: dict[str, Any], url: str, scheme_name: str | None, wanted: Wanted
) -> tuple[Scheme, FingerprintParams]:
    """The scheme and params an index was built with; every setting the caller
    gave must equal them (:class:`ManifestMismatch` lists those that do not)."""
    if manifest.get("format_version") != FORMAT_VERSION:
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
