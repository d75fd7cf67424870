"""The C fast path of fingerprinting (simhash_hbase/fingerprint/_native.c).

Optional: without a C compiler the install goes on, and fingerprints come from the
pure-Python path, which gives the same values (``shdb --version`` says which runs).
Everything else about the build is in pyproject.toml.
"""

import sys

from setuptools import Extension, setup

# No fused multiply-add: each product and square root rounds as Python's floats do.
_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "simhash_hbase.fingerprint._native",
            ["simhash_hbase/fingerprint/_native.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ]
)
