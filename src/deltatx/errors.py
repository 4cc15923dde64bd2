"""Every exception deltatx raises, rooted at :class:`DeltaError`.

Conflict exceptions keep the names Delta Lake documents; their messages start with the error
class (``[DELTA_CONCURRENT_APPEND] ...``) and they carry the winning commit, what collided and a
hint that says how to avoid the conflict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DOC_LINK = "https://docs.delta.io/latest/concurrency-control.html"


class DeltaError(Exception):
    """Root of every error deltatx raises."""


class InvalidArgumentError(DeltaError, ValueError):
    """A call was given a value it cannot use; nothing was written."""


class TableNotFoundError(DeltaError):
    """There is no Delta table at the given path."""


class TableAlreadyExistsError(DeltaError):
    """A table was to be created where one already exists."""


class InvalidTableError(DeltaError):
    """The table's log is unreadable or inconsistent (corrupt JSON, a version gap, ...)."""


class VersionNotFoundError(DeltaError):
    """A version or timestamp that the table's log does not hold was asked for."""


class VersionNotReadableError(DeltaError):
    """A version is in the log but files it needs are gone (VACUUM removed them).

    Attributes:
        version: The version asked for.
        missing_files: Locations of the data and deletion vector files that are gone.
        oldest_readable_version: The oldest version whose files are all present, if known.
    """

    def __init__(
        self,
        message: str,
        *,
        version: int,
        missing_files: tuple[str, ...],
        oldest_readable_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.version = version
        self.missing_files = missing_files
        self.oldest_readable_version = oldest_readable_version


class ChangeDataNotRecordedError(DeltaError):
    """A change data feed read covers a version written while the feed was off.

    Attributes:
        version: The first version in the range whose changes were not recorded.
    """

    def __init__(self, message: str, *, version: int) -> None:
        super().__init__(message)
        self.version = version


class UnsupportedFeatureError(DeltaError):
    """The table requires a protocol version or table feature that deltatx does not support."""

    def __init__(self, message: str, *, feature: str | None = None) -> None:
        super().__init__(message)
        self.feature = feature


class AppendOnlyViolationError(InvalidArgumentError):
    """A commit would remove or delete rows of an append-only table (``delta.appendOnly``)."""


class UnsupportedOptionError(InvalidArgumentError):
    """A reader or writer option deltatx does not implement; refused rather than ignored."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message)
        self.option = option


class ConstraintViolationError(InvalidArgumentError):
    """Rows to be written break a CHECK constraint or a column invariant; nothing was written."""

    def __init__(self, message: str, *, constraint: str) -> None:
        super().__init__(message)
        self.constraint = constraint


class InvalidPropertyError(InvalidArgumentError):
    """A table property has a value that is not allowed."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class StreamingSourceError(DeltaError):
    """A streaming read reached a commit it cannot deliver; the query stops there.

    Attributes:
        table_path: The table being read.
        version: The commit the stream stopped at.
    """

    def __init__(self, message: str, *, table_path: str, version: int) -> None:
        super().__init__(message)
        self.table_path = table_path
        self.version = version


class StreamMetadataChangedError(StreamingSourceError):
    """A commit changed the schema, partitioning, properties or protocol under a stream."""


class StreamDataChangedError(StreamingSourceError):
    """A commit removed or rewrote rows (DELETE, UPDATE, MERGE) under an append-only stream."""


class UnsupportedPropertyError(InvalidPropertyError):
    """A ``delta.*`` table property that deltatx does not implement; refused, never ignored.

    Attributes:
        supported: The ``delta.*`` properties deltatx implements, for the message's reader.
    """

    def __init__(self, message: str, *, key: str, supported: tuple[str, ...]) -> None:
        super().__init__(message, key=key)
        self.supported = supported


class SchemaMismatchError(DeltaError):
    """Data does not match the table schema; the message names the column."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


class StorageAccessError(DeltaError):
    """The table's storage refused an operation (no permission, a name it cannot hold).

    Attributes:
        path: The path the storage refused, where it is known.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class JavaNotFoundError(DeltaError):
    """No Java runtime was found, so a local Spark session cannot start."""


class ExtensionBuildError(DeltaError):
    """deltatx's Spark reader extension could not be compiled (no Java, no Janino)."""


class InvalidConditionError(InvalidArgumentError):
    """A SQL condition or expression could not be parsed or refers to unknown columns."""


class ConditionSyntaxError(InvalidConditionError):
    """A SQL condition is not valid SQL; the message names the construct and where it failed.

    Attributes:
        condition: The condition as given.
        construct: The SQL construct that could not be completed (``AND``, ``=``, ...), or the
            token that was not expected.
        column: The 1-based character position in the condition where parsing stopped.
    """

    def __init__(self, message: str, *, condition: str, construct: str, column: int) -> None:
        super().__init__(message)
        self.condition = condition
        self.construct = construct
        self.column = column


class SqlError(InvalidArgumentError):
    """A SQL statement does not parse or cannot run; the message says where (line, column)."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None) -> None:
        where = (
            f" (line {line}, column {column})" if line is not None and column is not None else ""
        )
        super().__init__(f"{message}{where}")
        self.line = line
        self.column = column


class UnsupportedStatementError(SqlError):
    """A SQL construct that deltatx does not run; ``construct`` names it."""

    def __init__(
        self,
        message: str,
        *,
        construct: str,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message, line=line, column=column)
        self.construct = construct


class TransactionStateError(DeltaError):
    """A transaction was used after it committed or aborted."""


class CommitFailedError(DeltaError):
    """A commit could not be published for a reason that is not a logical conflict."""


class CommitRetriesExceededError(CommitFailedError):
    """The commit lost the race for a version more often than the retry limit allows."""

    def __init__(
        self,
        *,
        attempts: int,
        start_version: int,
        failed_version: int,
        num_actions: int,
        elapsed_ms: float,
    ) -> None:
        super().__init__(
            f"[DELTA_MAX_COMMIT_RETRIES_EXCEEDED] This commit has failed as it has been tried "
            f"{attempts} times but did not succeed. This can be caused by the table being "
            f"committed continuously by many concurrent writers. Commit started at version: "
            f"{start_version}. Commit failed at version: {failed_version}. Number of actions "
            f"attempted to commit: {num_actions}. Total time spent attempting this commit: "
            f"{elapsed_ms:.0f} ms. Raise the limit with the table property "
            f"'deltatx.maxCommitAttempts' or spread the writers out."
        )
        self.attempts = attempts
        self.start_version = start_version
        self.failed_version = failed_version


def format_partition(values: Mapping[str, str | None] | None) -> str | None:
    """Renders partition values as ``[c1=v1, c2=v2]``, or None for an unpartitioned file."""
    if not values:
        return None
    return "[" + ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items()) + "]"


class ConcurrentModificationException(DeltaError):
    """Base of the conflict exceptions: a concurrent commit invalidated this transaction.

    Attributes:
        winning_version: The version of the commit that won the race.
        winning_operation: That commit's operation, e.g. ``"DELETE"``.
        file: The file that collided, when one did.
        partition_values: The partition the collision happened in, when known.
        rows: Row indexes that collided (row-level concurrency), when known.
        hint: A sentence that says how to avoid this conflict.
        not_retried_because: Set when the caller asked for re-execution (``retries=N``) and
            the statement was not run again: why (see :mod:`deltatx.reexecution`).
        attempts: With re-execution: how many times the statement was executed.
        read_versions: With re-execution: the version each execution read.
    """

    not_retried_because: str | None = None
    attempts: int = 1
    read_versions: tuple[int, ...] = ()

    error_class: str = "DELTA_CONCURRENT_WRITE"
    summary: str = (
        "A concurrent transaction has written data since this transaction read the table."
    )

    def __init__(
        self,
        *,
        winning_version: int,
        winning_operation: str,
        file: str | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        rows: Sequence[int] | None = None,
        hint: str = "",
        detail: str = "",
    ) -> None:
        self.winning_version = winning_version
        self.winning_operation = winning_operation
        self.file = file
        self.partition_values = dict(partition_values) if partition_values else None
        self.rows = tuple(rows) if rows is not None else None
        self.hint = hint
        self.detail = detail
        super().__init__(self._render())

    @property
    def partition(self) -> str | None:
        """The collided partition as ``[c=v]``, or None for an unpartitioned table."""
        return format_partition(self.partition_values)

    def _render(self) -> str:
        parts = [
            f"[{self.error_class}] {self.summary} Conflicting commit: version "
            f"{self.winning_version} ({self.winning_operation})."
        ]
        if self.detail:
            parts.append(self.detail)
        where = []
        if self.partition is not None:
            where.append(f"partition {self.partition}")
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.rows is not None:
            shown = ", ".join(str(r) for r in self.rows[:10])
            more = f" and {len(self.rows) - 10} more" if len(self.rows) > 10 else ""
            where.append(f"rows {shown}{more}")
        if where:
            parts.append("Collided on " + ", ".join(where) + ".")
        if self.hint:
            parts.append("Hint: " + self.hint)
        parts.append(f"Refer to {DOC_LINK} for more information.")
        return " ".join(parts)


class ConcurrentAppendException(ConcurrentModificationException):
    """A concurrent commit added files that this transaction should have read."""

    error_class = "DELTA_CONCURRENT_APPEND"
    summary = "A concurrent operation added data that this transaction should have read."


class ConcurrentDeleteReadException(ConcurrentModificationException):
    """A concurrent commit removed a file that this transaction read."""

    error_class = "DELTA_CONCURRENT_DELETE_READ"
    summary = "A concurrent operation deleted data that this transaction read."


class ConcurrentDeleteDeleteException(ConcurrentModificationException):
    """A concurrent commit removed a file that this transaction also removes."""

    error_class = "DELTA_CONCURRENT_DELETE_DELETE"
    summary = "A concurrent operation deleted data that this transaction also deletes."


class MetadataChangedException(ConcurrentModificationException):
    """A concurrent commit changed the table's metadata (schema, properties, partitioning)."""

    error_class = "DELTA_METADATA_CHANGED"
    summary = "The metadata of the table has been changed by a concurrent update."


class ConcurrentTransactionException(ConcurrentModificationException):
    """A concurrent commit used the same application id (or metadata domain)."""

    error_class = "DELTA_CONCURRENT_TRANSACTION"
    summary = "A concurrent transaction committed with the same application id."


class ProtocolChangedException(ConcurrentModificationException):
    """A concurrent commit changed the protocol, or created the table at the same path."""

    error_class = "DELTA_PROTOCOL_CHANGED"
    summary = "The protocol of the table has been changed by a concurrent update."


__all__ = [
    "ChangeDataNotRecordedError",
    "CommitFailedError",
    "CommitRetriesExceededError",
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentModificationException",
    "ConcurrentTransactionException",
    "ConditionSyntaxError",
    "DeltaError",
    "InvalidArgumentError",
    "InvalidConditionError",
    "InvalidPropertyError",
    "InvalidTableError",
    "JavaNotFoundError",
    "MetadataChangedException",
    "ProtocolChangedException",
    "SchemaMismatchError",
    "StreamDataChangedError",
    "StreamMetadataChangedError",
    "StreamingSourceError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TransactionStateError",
    "UnsupportedFeatureError",
    "UnsupportedOptionError",
    "VersionNotFoundError",
]
