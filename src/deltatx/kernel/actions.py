"""The actions of the Delta transaction log, as frozen dataclasses.

Names follow PROTOCOL.md. Every action keeps the fields it does not know in ``extra`` so that a
log written by a newer engine survives a read-modify-write round trip unchanged. What file
skipping reads of an ``add`` is :class:`FileStatistics`; :class:`FileSummary` is just that part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

JsonDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProtocolAction:
    """The ``protocol`` action: reader/writer versions and, for (3, 7), named features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Format:
    """The data file format of a table (always Parquet here)."""

    provider: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Metadata:
    """The ``metaData`` action: schema, partitioning and table properties."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    format: Format = field(default_factory=Format)
    name: str | None = None
    description: str | None = None
    created_time: int | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """Where a file's deletion vector lives and how many rows it deletes."""

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)

    @property
    def unique_id(self) -> str:
        """The identifier that, with a path, keys a file action during log replay."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"


@dataclass(frozen=True, slots=True)
class AddFile:
    """The ``add`` action: a data file that is part of the table."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)

    @property
    def dv_id(self) -> str | None:
        """The deletion vector's unique id, or None when the file has none."""
        return None if self.deletion_vector is None else self.deletion_vector.unique_id

    def remove(self, *, timestamp: int, data_change: bool = True) -> RemoveFile:
        """The ``remove`` action that takes this exact file (and its DV) out of the table."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=self.partition_values,
            size=self.size,
            stats=self.stats,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


class FileStatistics(Protocol):
    """What file skipping reads of a data file: an ``add`` action, or a :class:`FileSummary`."""

    @property
    def partition_values(self) -> Mapping[str, str | None] | None:
        """The file's partition values, by partition column."""

    @property
    def stats(self) -> str | None:
        """The file's statistics JSON, if it has any."""


@dataclass(frozen=True, slots=True)
class FileSummary:
    """A file's partition values and statistics without the rest of its ``add`` action.

    Attributes:
        partition_values: The file's partition values, by partition column.
        stats: The file's statistics JSON, if it has any.
    """

    partition_values: Mapping[str, str | None] | None
    stats: str | None


@dataclass(frozen=True, slots=True)
class RemoveFile:
    """The ``remove`` action: a tombstone for a file that left the table."""

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)

    @property
    def dv_id(self) -> str | None:
        """The deletion vector's unique id, or None when the file has none."""
        return None if self.deletion_vector is None else self.deletion_vector.unique_id


@dataclass(frozen=True, slots=True)
class AddCDCFile:
    """The ``cdc`` action: a change-data file; never part of the table's rows."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str] | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class SetTransaction:
    """The ``txn`` action: the latest version an application committed (idempotent writes)."""

    app_id: str
    version: int
    last_updated: int | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class DomainMetadata:
    """The ``domainMetadata`` action: configuration owned by a named metadata domain."""

    domain: str
    configuration: str
    removed: bool = False
    extra: JsonDict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """The ``commitInfo`` action: provenance of a commit (operation, metrics, isolation level)."""

    timestamp: int | None = None
    operation: str | None = None
    operation_parameters: dict[str, Any] | None = None
    read_version: int | None = None
    isolation_level: str | None = None
    is_blind_append: bool | None = None
    operation_metrics: dict[str, str] | None = None
    user_metadata: str | None = None
    engine_info: str | None = None
    txn_id: str | None = None
    in_commit_timestamp: int | None = None
    extra: JsonDict = field(default_factory=dict, compare=False)

    @property
    def commit_timestamp(self) -> int | None:
        """When the commit happened: ``inCommitTimestamp`` when the writer recorded one.

        Writers record it only while in-commit timestamps are enabled, and then it, not the
        wall clock of ``timestamp`` or the file's modification time, is the commit's time.
        """
        return self.in_commit_timestamp if self.in_commit_timestamp is not None else self.timestamp


@dataclass(frozen=True, slots=True)
class UnknownAction:
    """An action type this version of deltatx does not know; kept to survive round trips."""

    key: str
    value: Any


FileAction = AddFile | RemoveFile | AddCDCFile
Action = (
    ProtocolAction
    | Metadata
    | AddFile
    | RemoveFile
    | AddCDCFile
    | SetTransaction
    | DomainMetadata
    | CommitInfo
    | UnknownAction
)
