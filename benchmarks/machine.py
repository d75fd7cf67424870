"""What the numbers were measured on: CPU, cores, RAM, versions, and how busy it was."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = (
    "numpy",
    "lmdb",
    "happybase",
    "thriftpy2",
    "jieba",
    "mmh3",
    "simhash",
    "matplotlib",
    "simhash-hbase",
)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _ram_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024**2
    return 0.0


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _java() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    return out.stderr.splitlines()[0] if out.stderr else "?"


def _blas() -> str:
    """NumPy's BLAS (irrelevant to XOR/popcount, recorded because the env may pin it)."""
    names = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    pinned = {k: os.environ[k] for k in names if k in os.environ}
    return ", ".join(f"{k}={v}" for k, v in pinned.items()) or "not pinned"


def describe(hbase_version: str | None) -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(_ram_gib(), 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in _PACKAGES},
        "java": _java(),
        "hbase": hbase_version or "not run",
        "openblas_env": _blas(),
    }


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()
