"""The C fast path of fingerprinting (simhash_hbase/fingerprint/_native.c).

Optional: without a C compiler the install goes on, and fingerprints come from the
pure-Python path, which gives the same values (``shdb --version`` says which runs).
Everything else about the build is in pyproject.toml.
"""

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

# No fused multiply-add: each product and square root rounds as Python's floats do.
_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off"]

_SOURCE = "simhash_hbase/fingerprint/_native.c"
# The module carries its source's digest: a build left over from older code (an
# editable install after a git pull) is then told apart and not used.
_DIGEST = hashlib.sha256((Path(__file__).parent / _SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "simhash_hbase.fingerprint._native",
            [_SOURCE],
            define_macros=[("SHDB_SOURCE_SHA256", f'"{_DIGEST}"')],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ]
)
