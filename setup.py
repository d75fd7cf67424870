"""The C kernels of simhash_hbase (simhash_hbase/_native/*.c): one extension,
``simhash_hbase._native._kernels``, built from the text kernels (text.c, terms.c)
and the page and cell kernels (probes.c, match.c).

Optional: without a C compiler the install goes on, and everything comes from the
pure-Python paths, which give the same values (``shdb --version`` says which runs).
Everything else about the build is in pyproject.toml.
"""

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

# No fused multiply-add: each product and square root rounds as Python's floats do.
_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off"]

_FOLDER = "simhash_hbase/_native"
_SOURCES = [
    f"{_FOLDER}/{name}" for name in ("module.c", "text.c", "terms.c", "probes.c", "match.c")
]
_HEADERS = [f"{_FOLDER}/kernels.h"]


def sources_digest(folder: Path) -> str:
    """The digest of every C source and header in ``folder``, by name: the same
    function as ``simhash_hbase._native.sources_digest`` (which cannot be imported
    here: the package is not built yet)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.[ch]")):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


# The module carries its sources' digest: a build left over from older code (an
# editable install after a git pull) is then told apart and not used.
_DIGEST = sources_digest(Path(__file__).parent / _FOLDER)

setup(
    ext_modules=[
        Extension(
            "simhash_hbase._native._kernels",
            _SOURCES,
            depends=_HEADERS,
            define_macros=[("SHDB_SOURCE_SHA256", f'"{_DIGEST}"')],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ]
)
