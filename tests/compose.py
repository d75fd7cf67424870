"""The project's compose files read as compose reads them, so that tests run the image
exactly as a compose service defines it (no compose needed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DOCKER = Path(__file__).resolve().parents[1] / "docker"


def compose_services(name: str, variables: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The services of ``docker/NAME`` with ``${VAR:-default}`` resolved as compose does
    (``variables`` set, else the default) and YAML merge keys (``<<: *anchor``) applied."""

    def resolve(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str):
            return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: variables.get(m[1]) or m[2], value)
        return value

    compose = yaml.safe_load((DOCKER / name).read_text())
    return resolve(compose["services"])  # type: ignore[no-any-return]
