"""How partition values are spelt in directory names, as Spark spells them."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory-name value Spark writes for a NULL partition value."""

# Characters Spark escapes in partition directory names (plus control characters), as %XX.
_PARTITION_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")
_SPARK_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def escape_partition_name(text: str) -> str:
    """A partition column name or value as Spark spells it in a directory name."""
    return "".join(
        f"%{ord(c):02X}" if c in _PARTITION_ESCAPED or ord(c) < 0x20 else c for c in text
    )


def unescape_partition_name(text: str) -> str:
    """Reverses Spark's ``%XX`` escaping of partition directory names."""
    return _SPARK_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def partition_directories(
    columns: tuple[str, ...] | list[str], values: tuple[str | None, ...]
) -> list[str]:
    """The ``column=value`` directories of one partition, outermost first."""
    return [
        f"{escape_partition_name(c)}="
        f"{HIVE_DEFAULT_PARTITION if v is None else escape_partition_name(v)}"
        for c, v in zip(columns, values, strict=True)
    ]


def partition_value_text(value: Any) -> str | None:
    """A partition value as the log spells it (timestamps in UTC, with microseconds)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)
