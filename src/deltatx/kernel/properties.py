"""Table properties (``delta.*`` and ``deltatx.*``): parsing, defaults and validation.

Every property deltatx interprets is declared here once, with its parser; setting a property
validates it, and reading one from a log is lenient where the protocol asks for it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from deltatx.errors import InvalidPropertyError, UnsupportedPropertyError
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


CONSTRAINT_PREFIX = "delta.constraints."


class PropertyStatus(StrEnum):
    """Whether deltatx implements a ``delta.*`` property."""

    SUPPORTED = "supported"
    NOT_IMPLEMENTED = "not implemented"


@dataclass(frozen=True, slots=True)
class KnownProperty:
    """One ``delta.*`` key of the Delta ecosystem and what deltatx does with it.

    Attributes:
        key: The key, or its prefix (ending in ``.``) when ``prefix`` is set.
        status: Whether deltatx implements it; setting one it does not is refused.
        prefix: The entry covers every key that starts with ``key``.
        inert: A value that switches the behaviour off; setting it is harmless, so it is
            accepted even when the property is not implemented.
    """

    key: str
    status: PropertyStatus
    prefix: bool = False
    inert: str | None = None

    def matches(self, lowered: str) -> bool:
        """Whether a lower-cased key is this property."""
        own = self.key.lower()
        return (
            lowered.startswith(own) and len(lowered) > len(own) if self.prefix else lowered == own
        )


_S = PropertyStatus.SUPPORTED
_N = PropertyStatus.NOT_IMPLEMENTED

# Every delta.* property deltatx knows of, in one table: flip a row's status when a feature
# lands. Keys absent from it are refused as misspellings; keys outside delta.* are the user's.
KNOWN_PROPERTIES: tuple[KnownProperty, ...] = (
    *(KnownProperty(spec.key, _S) for spec in SPECS.values() if spec.key.startswith("delta.")),
    KnownProperty(CONSTRAINT_PREFIX, _S, prefix=True),
    KnownProperty("delta.autoOptimize.autoCompact", _N, inert="false"),
    KnownProperty("delta.autoOptimize.optimizeWrite", _N, inert="false"),
    KnownProperty("delta.checkpoint.writeStatsAsJson", _N),
    KnownProperty("delta.checkpoint.writeStatsAsStruct", _N),
    # Kept by deltatx itself: column ids it assigns, and when in-commit timestamps began.
    KnownProperty("delta.columnMapping.maxColumnId", _S),
    KnownProperty("delta.compatibility.symlinkFormatManifest.enabled", _N, inert="false"),
    KnownProperty("delta.coordinatedCommits.", _N, prefix=True),
    KnownProperty("delta.dataSkippingNumIndexedCols", _N),
    KnownProperty("delta.dataSkippingStatsColumns", _N),
    KnownProperty("delta.enableChangeDataFeed", _S),
    KnownProperty("delta.enableExpiredLogCleanup", _N),
    KnownProperty("delta.enableFullRetentionRollback", _N),
    KnownProperty("delta.enableIcebergCompatV1", _N, inert="false"),
    KnownProperty("delta.enableIcebergCompatV2", _N, inert="false"),
    KnownProperty("delta.enableRowTracking", _N, inert="false"),
    KnownProperty("delta.enableTypeWidening", _N, inert="false"),
    KnownProperty("delta.enableVariantShredding", _N, inert="false"),
    KnownProperty("delta.feature.", _N, prefix=True),
    KnownProperty("delta.inCommitTimestampEnablementTimestamp", _S),
    KnownProperty("delta.inCommitTimestampEnablementVersion", _S),
    KnownProperty("delta.minReaderVersion", _N),
    KnownProperty("delta.minWriterVersion", _N),
    KnownProperty("delta.parquet.compression.codec", _N),
    KnownProperty("delta.randomizeFilePrefixes", _N, inert="false"),
    KnownProperty("delta.randomPrefixLength", _N),
    KnownProperty("delta.rowTracking.materializedRowCommitVersionColumnName", _N),
    KnownProperty("delta.rowTracking.materializedRowIdColumnName", _N),
    KnownProperty("delta.sampleRetentionDuration", _N),
    KnownProperty("delta.setTransactionRetentionDuration", _N),
    KnownProperty("delta.tuneFileSizesForRewrites", _N, inert="false"),
    KnownProperty("delta.universalFormat.enabledFormats", _N),
)


def known_property(key: str) -> KnownProperty | None:
    """The registry entry of a ``delta.*`` key (case-insensitive), or None when unknown."""
    lowered = key.lower()
    return next((p for p in KNOWN_PROPERTIES if p.matches(lowered)), None)


def supported_properties() -> tuple[str, ...]:
    """The ``delta.*`` properties deltatx implements (a prefix is shown as ``prefix<name>``)."""
    return tuple(
        f"{p.key}<name>" if p.prefix else p.key
        for p in KNOWN_PROPERTIES
        if p.status is PropertyStatus.SUPPORTED
    )


def check_property_supported(key: str, value: str) -> None:
    """Refuses setting a ``delta.*`` property deltatx does not implement or does not know.

    Keys outside ``delta.`` are user properties and always pass.

    Raises:
        UnsupportedPropertyError: The key is a Delta property deltatx does not implement, or
            is not a Delta property at all (a misspelling); the message lists the supported
            ones.
    """
    if not key.lower().startswith("delta."):
        return
    entry = known_property(key)
    if entry is not None and entry.status is PropertyStatus.SUPPORTED:
        return
    if entry is not None and entry.inert is not None and value.strip().lower() == entry.inert:
        return
    supported = supported_properties()
    listing = ", ".join(supported)
    if entry is None:
        near = difflib.get_close_matches(key, [p.key for p in KNOWN_PROPERTIES], n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise UnsupportedPropertyError(
            f"'{key}' is not a Delta table property{hint}. The delta.* properties deltatx "
            f"supports are: {listing}. Nothing was changed.",
            key=key,
            supported=supported,
        )
    off = f" (only '{entry.inert}' is accepted)" if entry.inert is not None else ""
    shown = key if entry.prefix else entry.key
    raise UnsupportedPropertyError(
        f"the table property '{shown}' is not implemented by deltatx{off}; setting it would be "
        f"ignored, so it is refused. The delta.* properties deltatx supports are: {listing}. "
        "Nothing was changed.",
        key=key,
        supported=supported,
    )


def validate_properties(props: Mapping[str, Any]) -> dict[str, str]:
    """Validates properties being set and returns them as the strings the log stores.

    Keys are matched case-sensitively for storage but case-insensitively for validation, so
    ``DELTA.isolationLevel`` cannot slip past. Booleans are normalised to ``true``/``false``.

    Raises:
        InvalidPropertyError: A value is not allowed; the message names the key and why.
        UnsupportedPropertyError: A ``delta.*`` key deltatx does not implement or know.
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
        elif key.lower().startswith("deltatx."):
            raise InvalidPropertyError(
                f"'{key}' is not a deltatx property; deltatx.* properties are: "
                + ", ".join(k for k in SPECS if k.startswith("deltatx.")),
                key=key,
            )
        else:
            check_property_supported(key, value)
            if key.lower().startswith(CONSTRAINT_PREFIX):
                key = CONSTRAINT_PREFIX + key[len(CONSTRAINT_PREFIX) :]
                if not value.strip():
                    raise InvalidPropertyError(
                        f"{key}: a CHECK constraint needs a boolean expression", key=key
                    )
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
