"""Run one fuzz target under atheris (coverage-guided, libFuzzer):

    python -m fuzz.run TARGET [libFuzzer flags, e.g. -max_total_time=3600 fuzz/corpus/TARGET]

TARGET is one of :data:`fuzz.targets.TARGETS`. The project's modules are
instrumented for coverage; a failed check or an unexpected exception stops the
run with the input saved as ``crash-*`` (libFuzzer's convention).
"""

from __future__ import annotations

import sys


def main() -> None:
    import atheris

    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m fuzz.run TARGET [libFuzzer flags]")
    name = sys.argv.pop(1)
    with atheris.instrument_imports(include=["simhash_hbase", "fuzz"]):
        from fuzz.targets import TARGETS
        from simhash_hbase.fingerprint import segment, simhash  # noqa: F401  (instrumented)
        from simhash_hbase.text import extract, html, readers  # noqa: F401
    if name not in TARGETS:
        raise SystemExit(f"unknown target {name!r}; one of: {', '.join(TARGETS)}")
    atheris.Setup(sys.argv, TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
