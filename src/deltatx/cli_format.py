"""How the ``deltatx`` command spells values: timestamps, sizes and operation parameters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def iso_time(millis: int) -> str:
    """A Delta timestamp (milliseconds since the epoch) as ISO 8601 with its time zone."""
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds")


def short_time(millis: int) -> str:
    """A Delta timestamp as ``YYYY-MM-DD HH:MM:SS`` (UTC), for narrow tables."""
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def human_size(num_bytes: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``: binary units, one decimal from KiB up."""
    if num_bytes is None:
        return ""
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} PiB"  # pragma: no cover - the loop returns at TiB


def compact(value: Any) -> str:
    """One value of operationParameters, without Python's quoting: JSON for structures."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if isinstance(decoded, list | dict):
            value = decoded
        else:
            return value
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def pairs(values: Mapping[str, Any] | None, *, skip_zero: bool = False) -> str:
    """``k=v`` lines, sorted, values spelled by :func:`compact` (zeros left out on request)."""
    if not values:
        return ""
    shown = [
        f"{k}={compact(v)}"
        for k, v in sorted(values.items())
        if v is not None and not (skip_zero and str(v) == "0")
    ]
    return "\n".join(shown)
