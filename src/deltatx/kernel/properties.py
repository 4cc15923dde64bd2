"""Table properties (``delta.*`` and ``deltatx.*``): parsing, defaults and validation.

Every property deltatx interprets is declared here once, with its parser; setting a property
validates it, and reading one from a log is lenient where the protocol asks for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deltatx.errors import InvalidPropertyError
from deltatx.kernel.column_mapping import MODE_KEY, ColumnMappingMode, parse_mode
from deltatx.kernel.isolation import (
    SETTABLE_LEVELS,
    IsolationLevel,
    parse_isolation_level_lenient,
)

_INTERVAL = re.compile(
    r"^\s*interval\s+(\d+)\s+(nanosecond|microsecond|millisecond|second|minute|hour|day|week)s?\s*$",
    re.IGNORECASE,
)
_UNIT_MS = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1.0,
    "second": 1000.0,
    "minute": 60_000.0,
    "hour": 3_600_000.0,
    "day": 86_400_000.0,
    "week": 604_800_000.0,
}


def parse_interval_ms(value: str) -> int:
    """Parses a Delta calendar interval such as ``interval 7 days`` into milliseconds.

    Raises:
        ValueError: The value is not an interval.
    """
    m = _INTERVAL.match(value)
    if not m:
        raise ValueError(f"'{value}' is not an interval like 'interval 7 days'")
    return int(int(m.group(1)) * _UNIT_MS[m.group(2).lower()])


def _parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"'{value}' is not a boolean (true or false)")


def _parse_positive_int(value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ValueError(f"'{value}' is not an integer") from None
    if n <= 0:
        raise ValueError(f"'{value}' must be a positive integer")
    return n


def _parse_isolation_strict(value: str) -> IsolationLevel:
    for level in SETTABLE_LEVELS:
        if level.value.lower() == value.strip().lower():
            return level
    allowed = " or ".join(f"'{lvl.value}'" for lvl in SETTABLE_LEVELS)
    raise ValueError(f"invalid isolation level '{value}'; allowed values are {allowed}")


@dataclass(frozen=True, slots=True)
class PropertySpec:
    """A table property deltatx understands: its default and how to parse it."""

    key: str
    default: str
    parse: Callable[[str], Any]
    parse_lenient: Callable[[str], Any] | None = None
    description: str = ""


ISOLATION_LEVEL = PropertySpec(
    "delta.isolationLevel",
    IsolationLevel.WRITE_SERIALIZABLE.value,
    _parse_isolation_strict,
    parse_isolation_level_lenient,
    "Serializable or WriteSerializable (default)",
)
ENABLE_DELETION_VECTORS = PropertySpec(
    "delta.enableDeletionVectors", "false", _parse_bool, None, "write deletion vectors in DML"
)
CHECKPOINT_INTERVAL = PropertySpec(
    "delta.checkpointInterval", "10", _parse_positive_int, None, "commits between checkpoints"
)
LOG_RETENTION = PropertySpec(
    "delta.logRetentionDuration", "interval 30 days", parse_interval_ms, None, "log history kept"
)
DELETED_FILE_RETENTION = PropertySpec(
    "delta.deletedFileRetentionDuration",
    "interval 7 days",
    parse_interval_ms,
    None,
    "how long removed files stay for readers of old snapshots",
)
APPEND_ONLY = PropertySpec("delta.appendOnly", "false", _parse_bool, None, "refuse deletes")
MAX_COMMIT_ATTEMPTS = PropertySpec(
    "deltatx.maxCommitAttempts", "10000", _parse_positive_int, None, "commit retries"
)
TARGET_FILE_SIZE = PropertySpec(
    "delta.targetFileSize", str(128 * 1024 * 1024), _parse_positive_int, None, "OPTIMIZE target"
)


def _parse_checkpoint_policy(value: str) -> str:
    lowered = value.strip().lower()
    if lowered in ("classic", "v2"):
        return lowered
    raise ValueError(f"'{value}' is not a checkpoint policy (classic or v2)")


CHECKPOINT_POLICY = PropertySpec(
    "delta.checkpointPolicy",
    "classic",
    _parse_checkpoint_policy,
    None,
    "classic, or v2 (v2 checkpoints; adds the v2Checkpoint table feature)",
)
ENABLE_IN_COMMIT_TIMESTAMPS = PropertySpec(
    "delta.enableInCommitTimestamps",
    "false",
    _parse_bool,
    None,
    "commit times recorded in the log, used by history and time travel",
)
COLUMN_MAPPING_MODE = PropertySpec(
    MODE_KEY, "none", parse_mode, None, "name or id: physical column names (rename, drop)"
)

SPECS: dict[str, PropertySpec] = {
    s.key: s
    for s in (
        ISOLATION_LEVEL,
        ENABLE_DELETION_VECTORS,
        CHECKPOINT_INTERVAL,
        LOG_RETENTION,
        DELETED_FILE_RETENTION,
        APPEND_ONLY,
        MAX_COMMIT_ATTEMPTS,
        TARGET_FILE_SIZE,
        CHECKPOINT_POLICY,
        ENABLE_IN_COMMIT_TIMESTAMPS,
        COLUMN_MAPPING_MODE,
    )
}


def validate_properties(props: Mapping[str, Any]) -> dict[str, str]:
    """Validates properties being set and returns them as the strings the log stores.

    Keys are matched case-sensitively for storage but case-insensitively for validation, so
    ``DELTA.isolationLevel`` cannot slip past. Booleans are normalised to ``true``/``false``.

    Raises:
        InvalidPropertyError: A value is not allowed; the message names the key and why.
    """
    out: dict[str, str] = {}
    for key, raw in props.items():
        if not isinstance(key, str) or not key:
            raise InvalidPropertyError(
                f"property key {key!r} must be a non-empty string", key=str(key)
            )
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        spec = _spec_for(key)
        if spec is not None:
            try:
                parsed = spec.parse(value)
            except ValueError as exc:
                raise InvalidPropertyError(f"{spec.key}: {exc}", key=spec.key) from None
            if isinstance(parsed, IsolationLevel | ColumnMappingMode):
                value = parsed.value
            elif isinstance(parsed, bool):
                value = "true" if parsed else "false"
            key = spec.key
        out[key] = value
    return out


def _spec_for(key: str) -> PropertySpec | None:
    lowered = key.lower()
    for spec in SPECS.values():
        if spec.key.lower() == lowered:
            return spec
    return None


@dataclass(frozen=True, slots=True)
class TableProperties:
    """The interpreted properties of one table version."""

    isolation_level: IsolationLevel
    enable_deletion_vectors: bool
    checkpoint_interval: int
    log_retention_ms: int
    deleted_file_retention_ms: int
    append_only: bool
    max_commit_attempts: int
    target_file_size: int

    @classmethod
    def from_configuration(cls, conf: Mapping[str, str]) -> TableProperties:
        """Reads a metadata configuration; unreadable values in a log fall back to defaults."""

        def get(spec: PropertySpec) -> Any:
            raw = conf.get(spec.key)
            if raw is None:
                return spec.parse(spec.default)
            if spec.parse_lenient is not None:
                return spec.parse_lenient(raw)
            try:
                return spec.parse(raw)
            except ValueError:
                return spec.parse(spec.default)

        return cls(
            isolation_level=get(ISOLATION_LEVEL),
            enable_deletion_vectors=get(ENABLE_DELETION_VECTORS),
            checkpoint_interval=get(CHECKPOINT_INTERVAL),
            log_retention_ms=get(LOG_RETENTION),
            deleted_file_retention_ms=get(DELETED_FILE_RETENTION),
            append_only=get(APPEND_ONLY),
            max_commit_attempts=get(MAX_COMMIT_ATTEMPTS),
            target_file_size=get(TARGET_FILE_SIZE),
        )
