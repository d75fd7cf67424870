"""The package's version, and installed distributions' versions read cheaply."""

from __future__ import annotations

import os
import re
import sys

__version__ = "0.1.0"

_SEPARATORS = re.compile(r"[-_.]+")


def dist_version(name: str) -> str:
    """``importlib.metadata.version(name)``, read from the distribution's
    ``*.dist-info/METADATA`` directly: importing ``importlib.metadata`` (email, zipfile,
    csv, ...) costs ~80 M instructions, a tenth of a one-shot ``shdb query``, whose
    manifest check records OpenCC's version. Like importlib.metadata, the first folder
    on ``sys.path`` holding the distribution wins; anything but one plain dist-info
    folder there (an egg, a zip on the path, two copies) is left to importlib.metadata."""
    wanted = _SEPARATORS.sub("_", name).lower()
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                names = [e.name for e in it if e.name.endswith((".dist-info", ".egg-info"))]
        except NotADirectoryError:
            break  # a zip file on the path: importlib.metadata reads those
        except OSError:
            continue
        found = [n for n in names if _dist_name(n) == wanted]
        if len(found) == 1 and found[0].endswith(".dist-info"):
            version = _metadata_version(os.path.join(entry or ".", found[0], "METADATA"))
            if version is not None:
                return version
        if found:
            break
    from importlib.metadata import version as metadata_version

    return metadata_version(name)


def _dist_name(folder: str) -> str:
    """The normalised distribution name of a ``name-version.dist-info`` folder."""
    stem = folder.rsplit(".", 1)[0]  # without .dist-info / .egg-info
    return _SEPARATORS.sub("_", stem.split("-", 1)[0]).lower()


def _metadata_version(path: str) -> str | None:
    """The ``Version:`` header of a METADATA file (headers end at the first blank line)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    return None
                if line.startswith("Version:"):
                    return line[len("Version:") :].strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None
