"""``readStream.format("delta")``: a table's appended rows, or its change data feed, as a stream.

Which files each micro-batch takes, and which commits stop the stream, is decided by
:class:`deltatx.log.streaming.StreamingLog`; this module is the Spark side: options, admission
control (``maxFilesPerTrigger``, ``maxBytesPerTrigger``), ``Trigger.AvailableNow``, and the
tasks, which read their files with the batch reader's :class:`FileReader` (deletion vectors
applied). With ``readChangeFeed`` the tasks read change files with the change feed reader's
:func:`read_change_file` instead, and the rows carry ``_change_type``, ``_commit_version`` and
``_commit_timestamp``. Offsets are plain JSON in the query's checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile, Metadata, ProtocolAction
from deltatx.kernel.schema import parse_schema
from deltatx.log.change_feed import ChangeFile
from deltatx.log.delta_log import DeltaLog
from deltatx.log.streaming import ReadLimits, StreamingLog, StreamOffset, starting_version_at
from deltatx.spark.datasource.change_feed import (
    ChangesPartition,
    plan_change_partitions,
    read_change_file,
)
from deltatx.spark.datasource.reader import (
    plan_partitions,
    read_partition,
)

STREAM_READ_OPTIONS = frozenset(
    {
        "path",
        "startingVersion",
        "startingTimestamp",
        "maxFilesPerTrigger",
        "maxBytesPerTrigger",
        "skipChangeCommits",
        "readChangeFeed",
    }
)
"""The streaming reader's options (matched case-insensitively)."""

DEFAULT_MAX_FILES = 1000
"""Files per micro-batch when neither ``maxFilesPerTrigger`` nor ``maxBytesPerTrigger`` is set."""

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(
            f"option {name} must be a positive integer, got {text!r}"
        ) from None
    if value <= 0:
        raise InvalidArgumentError(f"option {name} must be a positive integer, got {text!r}")
    return value


def _bytes(options: Mapping[str, str]) -> int | None:
    text = options.get("maxbytespertrigger")
    if text is None:
        return None
    match = _SIZE.match(text)
    if match is None or int(match.group(1)) <= 0:
        raise InvalidArgumentError(
            f"option maxBytesPerTrigger must be a positive size such as 1048576, 512k, 64m or "
            f"1g, got {text!r}"
        )
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _flag(options: Mapping[str, str], name: str) -> bool:
    text = options.get(name.lower())
    if text is None:
        return False
    if text.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(f"option {name} must be true or false, got {text!r}")
    return text.strip().lower() == "true"


def stream_start(log: DeltaLog, options: Mapping[str, str]) -> tuple[int, bool]:
    """Where a new stream starts: a version, and whether it is read as a whole snapshot.

    Without ``startingVersion``/``startingTimestamp`` the stream starts with every live row
    of the latest version, then follows the later commits.

    Raises:
        InvalidArgumentError: Both options, or a malformed value.
    """
    lowered = _lowered(options)
    version_text = lowered.get("startingversion")
    timestamp = lowered.get("startingtimestamp")
    if version_text is not None and timestamp is not None:
        raise InvalidArgumentError("give startingVersion or startingTimestamp, not both")
    if timestamp is not None:
        return starting_version_at(log, timestamp), False
    if version_text is None:
        return log.latest_version(), True
    if version_text.strip().lower() == "latest":
        return log.latest_version() + 1, False
    try:
        version = int(version_text)
    except ValueError:
        raise InvalidArgumentError(
            f"option startingVersion must be a version number or 'latest', got {version_text!r}"
        ) from None
    if version < 0:
        raise InvalidArgumentError(f"option startingVersion must be >= 0, got {version}")
    latest = log.latest_version()
    if version > latest:
        raise InvalidArgumentError(
            f"option startingVersion {version} is after the latest version {latest} of "
            f"{log.table_path}"
        )
    return version, False


def schema_version(log: DeltaLog, options: Mapping[str, str]) -> int:
    """The version whose schema a new stream reads with (its start, or the latest)."""
    version, _ = stream_start(log, options)
    return min(version, log.latest_version())


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streams a table's appended rows or its change feed (see the module docstring)."""

    def __init__(
        self,
        *,
        table_path: str,
        schema: SparkStructType,
        table_schema_json: str,
        partition_columns: Sequence[str],
        column_mapping: str,
        metadata: Metadata,
        protocol: ProtocolAction,
        options: Mapping[str, str],
    ) -> None:
        """Streams the table at ``table_path`` with the pinned ``metadata`` and ``protocol``.

        With ``readChangeFeed``, ``schema`` holds the change feed's three extra columns and
        ``table_schema_json`` the table's own columns.

        Raises:
            InvalidArgumentError: A malformed option.
        """
        lowered = _lowered(options)
        self.change_feed = _flag(lowered, "readChangeFeed")
        self.table_path = table_path
        self.schema = schema
        self.table_schema_json = table_schema_json
        self.partition_columns = tuple(partition_columns)
        self.column_mapping = column_mapping
        self.metadata = metadata
        self.protocol = protocol
        self.start = stream_start(DeltaLog.for_table(table_path), options)
        max_files = _positive(lowered, "maxFilesPerTrigger")
        max_bytes = _bytes(lowered)
        if max_files is None and max_bytes is None:
            max_files = DEFAULT_MAX_FILES
        self.limits = ReadLimits(max_files=max_files, max_bytes=max_bytes)
        self.skip_change_commits = _flag(lowered, "skipChangeCommits")
        self.last_version: int | None = None

    def _log(self) -> StreamingLog:
        return StreamingLog(
            DeltaLog.for_table(self.table_path),
            metadata=self.metadata,
            protocol=self.protocol,
            skip_change_commits=self.skip_change_commits,
            change_feed=self.change_feed,
        )

    def _offset(self, data: Mapping[str, Any]) -> StreamOffset:
        return StreamOffset.from_dict(data, table_id=self.metadata.id)

    def initialOffset(self) -> dict[str, Any]:
        """Before the first file of the starting version."""
        version, snapshot = self.start
        return self._log().starting_offset(version, snapshot=snapshot).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """The options' admission control (``maxFilesPerTrigger`` wins over bytes)."""
        if self.limits.max_files is not None:
            return ReadMaxFiles(self.limits.max_files)
        assert self.limits.max_bytes is not None
        return ReadMaxBytes(self.limits.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        """Reads no commit made after this call (``Trigger.AvailableNow``)."""
        self.last_version = DeltaLog.for_table(self.table_path).latest_version()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Where the next micro-batch ends, within ``limit``.

        Raises:
            StreamMetadataChangedError: The next commit changes the table's metadata.
            StreamDataChangedError: The next commit removes rows (without skipChangeCommits
                or readChangeFeed).
            ChangeDataNotRecordedError: With readChangeFeed, the next commit was written while
                the table did not record its change data feed.
        """
        limits = ReadLimits() if isinstance(limit, ReadAllAvailable) else self.limits
        _, end = self._log().files_after(
            self._offset(start), limits, last_version=self.last_version
        )
        return end.to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The batch's files, packed into tasks (by size; change files in log order)."""
        files = [f.file for f in self._log().files_between(self._offset(start), self._offset(end))]
        if self.change_feed:
            return plan_change_partitions([f for f in files if isinstance(f, ChangeFile)])
        return plan_partitions([f for f in files if isinstance(f, AddFile)])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The live rows of the partition's files (or their change rows)."""
        if isinstance(partition, ChangesPartition):
            table_schema = parse_schema(self.table_schema_json)
            for change in partition.files:
                yield from read_change_file(
                    self.table_path,
                    change,
                    table_schema=table_schema,
                    partition_columns=self.partition_columns,
                    column_mapping=self.column_mapping,
                )
            return
        yield from read_partition(self, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the table's files stay where they are."""

    def stop(self) -> None:
        """Nothing to release."""


__all__ = [
    "DEFAULT_MAX_FILES",
    "STREAM_READ_OPTIONS",
    "DeltaStreamReader",
    "schema_version",
    "stream_start",
]
