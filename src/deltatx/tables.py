"""The public facade: :class:`DeltaTable`, :class:`Transaction` and :func:`write`.

A DeltaTable is a handle, not a snapshot: each call works on the latest version at the time
of the call. A Transaction pins one snapshot, stages any number of statements (each sees the
earlier ones' changes) and publishes them as one version on :meth:`Transaction.commit`.
With ``retries=N`` a conflicting DML call or transaction is re-executed on the latest
snapshot when that keeps its meaning (see :mod:`deltatx.reexecution`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType as SparkStructType

from deltatx.builders import MergeBuilder, OptimizeBuilder
from deltatx.catalog import table_path
from deltatx.delta_spark_names import DeltaTableNames
from deltatx.errors import (
    DeltaError,
    ProtocolChangedException,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from deltatx.kernel.actions import Metadata
from deltatx.kernel.metrics import (
    DeleteMetrics,
    OptimizeMetrics,
    RestoreMetrics,
    UpdateMetrics,
    VacuumMetrics,
)
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.schema import StructType, parse_schema
from deltatx.kernel.table_configuration import with_generation_expressions
from deltatx.log.change_feed import changes_between, version_range
from deltatx.log.delta_log import DeltaLog
from deltatx.log.snapshot import Snapshot
from deltatx.log.transaction import OptimisticTransaction
from deltatx.log.vacuum import vacuum
from deltatx.progress import operation
from deltatx.reexecution import (
    Backoff,
    Reexecution,
    StatementKind,
    stabilise_source,
)
from deltatx.session import spark_session
from deltatx.spark.commands.common import (
    new_table_actions,
    parse_schema_argument,
    read_files,
)
from deltatx.spark.datasource import SHORT_NAME, DeltatxDataSource
from deltatx.spark.durability import log_for
from deltatx.transaction import Timestamp, Transaction
from deltatx.writes import write

T = TypeVar("T")


class DeltaTable(DeltaTableNames):
    """A handle on a Delta table at a path."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        """Use :meth:`for_path` or :meth:`create`; this does not check that a table exists."""
        self._spark = spark
        self._log = log_for(spark, path)
        self._alias: str | None = None
        self._latest: Snapshot | None = None

    @property
    def path(self) -> str:
        """The table root."""
        return self._log.table_path

    @property
    def log(self) -> DeltaLog:
        """The table's log."""
        return self._log

    @classmethod
    def for_path(cls, spark: SparkSession, path: str) -> DeltaTable:
        """A handle on the table at ``path``.

        Raises:
            TableNotFoundError: There is no Delta table at ``path``.
        """
        table = cls(spark, path)
        if not table._log.table_exists():
            raise TableNotFoundError(f"there is no Delta table at {table.path}")
        # Loaded now, as delta-spark's forPath and delta-rs's DeltaTable load it: a statement
        # then only looks for newer commits. A table that cannot be read keeps failing where
        # it is used, with that use's error.
        with contextlib.suppress(DeltaError):
            table._latest = table._log.snapshot()
        return table

    @classmethod
    def for_name(cls, spark: SparkSession, name: str) -> DeltaTable:
        """A handle on the table named ``name`` (``db.t`` or ``t``).

        The name resolves through Spark's catalog when it holds the table, otherwise through
        the deltatx catalog under ``spark.sql.warehouse.dir`` (see :mod:`deltatx.catalog`).

        Raises:
            TableNotFoundError: No Delta table has that name.
        """
        return cls.for_path(spark, table_path(spark, name))

    @classmethod
    def is_delta_table(cls, spark: SparkSession, path: str) -> bool:
        """Whether ``path`` holds a Delta table."""
        return DeltaLog.for_table(path).table_exists()

    @classmethod
    def create(
        cls,
        spark: SparkSession,
        path: str,
        *,
        schema: str | SparkStructType | StructType,
        partition_by: Sequence[str] | None = None,
        properties: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
        if_not_exists: bool = False,
        generated_columns: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        """Creates an empty table.

        Args:
            spark: The session.
            path: Where the table lives.
            schema: Its columns (DDL, a Spark or a Delta StructType).
            partition_by: Partition columns.
            properties: Table properties.
            name: The table's name in its metadata.
            description: The table's description.
            if_not_exists: Return the existing table instead of failing.
            generated_columns: ``{column: SQL}``: columns computed from the row's other
                columns on every write (``GENERATED ALWAYS AS``).

        Raises:
            TableAlreadyExistsError: A table exists at ``path`` (unless ``if_not_exists``).
            InvalidPropertyError: A property value is not allowed; nothing is written.
            InvalidConditionError: A generation expression does not resolve.
        """
        table = cls(spark, path)
        if table._log.table_exists():
            if if_not_exists:
                return table
            raise TableAlreadyExistsError(f"a Delta table already exists at {table.path}")
        metadata, protocol = new_table_actions(
            with_generation_expressions(parse_schema_argument(schema), generated_columns or {}),
            partition_by=list(partition_by or ()),
            properties=properties,
            name=name,
            description=description,
        )
        txn = OptimisticTransaction(table._log, None)
        txn.update_protocol(protocol)
        txn.update_metadata(metadata)
        txn.record_operation(
            Operation(
                OperationName.CREATE_TABLE,
                {
                    "isManaged": False,
                    "description": description,
                    "partitionBy": list(metadata.partition_columns),
                    "properties": dict(metadata.configuration),
                },
            ),
            {},
        )
        try:
            txn.commit()
        except ProtocolChangedException as exc:
            # Another writer created the table between our existence check and our commit.
            if if_not_exists and exc.winning_version == 0 and table._same_table(metadata):
                raise TableAlreadyExistsError(
                    f"another writer created the Delta table at {table.path} at the same time,"
                    " with the same schema and partitioning; nothing was written"
                ) from exc
            raise
        return table

    def _same_table(self, metadata: Metadata) -> bool:
        """Whether the table's version 0 has ``metadata``'s schema and partitioning."""
        theirs = self._log.snapshot(0).metadata
        return (
            parse_schema(theirs.schema_string) == parse_schema(metadata.schema_string)
            and theirs.partition_columns == metadata.partition_columns
        )

    def begin(self, *, retries: int = 0, backoff: Backoff | None = None) -> Transaction:
        """Starts a transaction pinned to the latest version.

        Args:
            retries: How many times a conflicting commit may be re-executed on the latest
                snapshot, replaying the recorded statements (see :mod:`deltatx.reexecution`).
            backoff: The waits between attempts (default :class:`Backoff`).
        """
        policy = Reexecution.of(retries, backoff)
        txn = Transaction(
            self._spark,
            self._log,
            self._refresh(),
            retries=policy.retries,
            backoff=policy.backoff,
        )
        txn._alias = self._alias
        return txn

    def _refresh(self) -> Snapshot:
        """The latest snapshot, updated incrementally from the last one this handle saw."""
        self._latest = self._log.update(self._latest)
        return self._latest

    def snapshot(
        self, version: int | None = None, *, timestamp: Timestamp | None = None
    ) -> Snapshot:
        """The table's state at a version or timestamp (default: latest)."""
        if version is None and timestamp is None:
            return self._refresh()
        return self._log.snapshot(version, timestamp=timestamp)

    def to_df(self, *, version: int | None = None, timestamp: Timestamp | None = None) -> DataFrame:
        """The table as a DataFrame, pinned to a version (default: the latest now)."""
        snap = self.snapshot(version, timestamp=timestamp)
        if version is not None or timestamp is not None:
            # An old version may have lost files to VACUUM: say so, rather than let Spark
            # fail later on a missing path.
            self._log.require_files(snap)
        txn = OptimisticTransaction(self._log, snap)
        return read_files(self._spark, txn, snap.add_files())

    def changes(
        self,
        starting_version: int | None = None,
        ending_version: int | None = None,
        *,
        starting_timestamp: Timestamp | None = None,
        ending_timestamp: Timestamp | None = None,
    ) -> DataFrame:
        """The change data feed of a range of versions (both ends inclusive).

        Each row is a row of the table as a commit changed it, with ``_change_type``
        (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
        ``_commit_version`` and ``_commit_timestamp``. The table must have recorded changes
        (``delta.enableChangeDataFeed = true``) for every version of the range.

        Args:
            starting_version: The first version; or give ``starting_timestamp`` (the first
                version committed at or after it).
            ending_version: The last version (default: the latest; later ones are clamped);
                or give ``ending_timestamp`` (the last version committed at or before it).
            starting_timestamp: Milliseconds, ``YYYY-MM-DD[ HH:MM:SS]`` or a datetime.
            ending_timestamp: As ``starting_timestamp``.

        Raises:
            ChangeDataNotRecordedError: A version of the range was written while the table
                did not record changes.
            InvalidArgumentError: No start, or contradictory bounds.
            VersionNotFoundError: The start is past the latest version.
        """
        start, end = version_range(
            self._log,
            starting_version=starting_version,
            ending_version=ending_version,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
        )
        # Checked here so that the error is raised as itself, not inside a Spark failure.
        changes_between(self._log, start, end)
        self._spark.dataSource.register(DeltatxDataSource)
        return (
            self._spark.read.format(SHORT_NAME)
            .option("readChangeFeed", "true")
            .option("startingVersion", str(start))
            .option("endingVersion", str(end))
            .load(self.path)
        )

    def version(self) -> int:
        """The latest version."""
        return self._log.latest_version()

    def history(self, limit: int | None = None) -> DataFrame:
        """One row per commit, newest first: version, timestamp, operation, metrics, ..."""
        rows = []
        for entry in self._log.history(limit):
            ci = entry.commit_info
            rows.append(
                (
                    entry.version,
                    datetime.utcfromtimestamp(entry.timestamp / 1000),
                    None if ci is None else ci.operation,
                    None if ci is None else _str_map(ci.operation_parameters),
                    None if ci is None else ci.read_version,
                    None if ci is None else ci.isolation_level,
                    None if ci is None else ci.is_blind_append,
                    None if ci is None else _str_map(ci.operation_metrics),
                    None if ci is None else ci.user_metadata,
                    None if ci is None else ci.engine_info,
                    None if ci is None else ci.txn_id,
                )
            )
        return self._spark.createDataFrame(rows, _HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row describing the table: location, partitioning, size, protocol, properties."""
        snap = self.snapshot()
        md: Metadata = snap.metadata
        configuration = snap.table_configuration
        features = sorted(configuration.reader_features | configuration.writer_features)
        row = (
            "delta",
            md.id,
            md.name,
            md.description,
            self.path,
            None if md.created_time is None else datetime.utcfromtimestamp(md.created_time / 1000),
            datetime.utcfromtimestamp(snap.timestamp / 1000),
            list(md.partition_columns),
            snap.num_files,
            snap.size_in_bytes,
            dict(md.configuration),
            snap.protocol.min_reader_version,
            snap.protocol.min_writer_version,
            features,
            snap.version,
            configuration.isolation_level.value,
        )
        return self._spark.createDataFrame([row], _DETAIL_SCHEMA)

    def run(
        self,
        work: Callable[[SparkSession, OptimisticTransaction], T],
        *,
        statement: StatementKind | None = None,
        not_replayable: str | None = None,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> T:
        """Runs one statement in a transaction of its own and commits it.

        Args:
            work: Stages the statement.
            statement: Declares what ``work`` is, making it re-executable (unless
                ``not_replayable`` says why not); an undeclared function never is.
            not_replayable: Why the statement cannot be re-executed.
            retries: Re-executions allowed on a conflict (see :mod:`deltatx.reexecution`).
            backoff: The waits between attempts.

        Returns:
            What the last execution of ``work`` returned (metrics gain ``attempts`` and
            ``read_versions``).
        """
        txn = self.begin(retries=retries, backoff=backoff)
        with txn:
            result = txn.run(work, statement=statement, not_replayable=not_replayable)
        return txn._final(result)

    def stable_source(self, df: DataFrame, *, retries: int = 0) -> tuple[DataFrame, str | None]:
        """The DataFrame a statement should read: materialised once when it may be retried."""
        if not Reexecution.of(retries, None).enabled:
            return df, None
        return stabilise_source(df, table_path=self.path)

    def alias(self, name: str) -> DeltaTable:
        """A handle whose MERGE conditions call the table ``name``."""
        other = DeltaTable(self._spark, self.path)
        other._alias = name
        return other

    def delete(
        self,
        condition: str | Column | None = None,
        *,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> DeleteMetrics:
        """Deletes the rows matching ``condition`` (all rows when None) in one commit.

        With ``retries=N`` a conflicting DELETE is re-executed on the latest snapshot up to N
        times when its condition is deterministic (see :mod:`deltatx.reexecution`).
        """
        txn = self.begin(retries=retries, backoff=backoff)
        with operation("DELETE", self.path), txn:
            first = txn.delete(condition)
        return txn._final(first)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
        *,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> UpdateMetrics:
        """Updates the rows matching ``condition``: ``set`` maps columns to expressions.

        With ``retries=N`` a conflicting UPDATE is re-executed on the latest snapshot up to N
        times when its condition and expressions are deterministic.
        """
        txn = self.begin(retries=retries, backoff=backoff)
        with operation("UPDATE", self.path), txn:
            first = txn.update(condition, set)
        return txn._final(first)

    def merge(self, source: DataFrame, condition: str | Column) -> MergeBuilder:
        """Starts a MERGE of ``source`` into this table on ``condition``."""
        return MergeBuilder(self, source, condition, self._alias)

    def optimize(self) -> OptimizeBuilder:
        """Starts an OPTIMIZE (compaction or Z-order)."""
        return OptimizeBuilder(self)

    def reorg_purge(self) -> OptimizeMetrics:
        """REORG TABLE ... APPLY (PURGE): rewrites the files that carry deletion vectors."""
        with operation("REORG", self.path), self.begin() as txn:
            return txn.reorg_purge()

    def vacuum(
        self,
        retention_hours: float | None = None,
        dry_run: bool = False,
        *,
        enforce_retention: bool = True,
    ) -> VacuumMetrics:
        """Deletes files no longer referenced and older than the retention."""
        return vacuum(
            self._log,
            retention_hours=retention_hours,
            dry_run=dry_run,
            enforce_retention=enforce_retention,
        )

    def restore_to_version(
        self, version: int, *, allow_missing_files: bool = False
    ) -> RestoreMetrics:
        """Restores the table to ``version`` in a new commit.

        Raises:
            VersionNotReadableError: VACUUM removed files that version needs (pass
                ``allow_missing_files=True`` to restore anyway).
        """
        with self.begin() as txn:
            return txn.restore_to_version(version, allow_missing_files=allow_missing_files)

    def restore_to_timestamp(
        self, timestamp: Timestamp, *, allow_missing_files: bool = False
    ) -> RestoreMetrics:
        """Restores the table to the version current at ``timestamp`` in a new commit."""
        with self.begin() as txn:
            return txn.restore_to_timestamp(timestamp, allow_missing_files=allow_missing_files)

    def set_properties(self, properties: Mapping[str, Any]) -> int:
        """Sets table properties in a commit of their own; returns the version."""
        with self.begin() as txn:
            txn.set_properties(properties)
        return _version(txn)

    def unset_properties(self, keys: Iterable[str], *, if_exists: bool = True) -> int:
        """Removes table properties in a commit of their own; returns the version."""
        with self.begin() as txn:
            txn.unset_properties(keys, if_exists=if_exists)
        return _version(txn)

    def add_constraint(self, name: str, expression: str) -> int:
        """Adds a CHECK constraint in a commit of its own; returns the version.

        The existing rows are checked first, and the protocol gains the ``checkConstraints``
        feature (writer version 3) when it lacks it. Every later write is checked.

        Raises:
            InvalidArgumentError: The name is not an identifier or is already taken.
            InvalidConditionError: The expression is not a valid boolean on the table.
            ConstraintViolationError: An existing row breaks it (the message shows the row).
        """
        with self.begin() as txn:
            txn.add_constraint(name, expression)
        return _version(txn)

    def drop_constraint(self, name: str, *, if_exists: bool = False) -> int:
        """Drops the CHECK constraint ``name`` in a commit of its own; returns the version.

        Raises:
            InvalidArgumentError: There is no such constraint and ``if_exists`` is False.
        """
        with self.begin() as txn:
            txn.drop_constraint(name, if_exists=if_exists)
        return _version(txn)

    def add_columns(self, columns: str | SparkStructType) -> int:
        """Adds nullable columns in a commit of their own; returns the version."""
        with self.begin() as txn:
            txn.add_columns(columns)
        return _version(txn)

    def rename_column(self, old: str, new: str) -> int:
        """Renames a column in a metadata-only commit of its own; returns the version.

        The table must use column mapping (``delta.columnMapping.mode`` ``name`` or ``id``):
        data files keep the column under its physical name, so no file is rewritten.

        Raises:
            UnsupportedFeatureError: The table does not use column mapping.
            SchemaMismatchError: ``old`` is not a column, ``new`` is taken, or a constraint
                uses ``old``.
        """
        with self.begin() as txn:
            txn.rename_column(old, new)
        return _version(txn)

    def drop_columns(self, *names: str) -> int:
        """Drops columns in a metadata-only commit of its own; returns the version.

        The table must use column mapping; the data files keep the dropped columns' values
        until they are rewritten (OPTIMIZE, DML), and readers no longer see them.

        Raises:
            UnsupportedFeatureError: The table does not use column mapping.
            SchemaMismatchError: A name is not a column, is a partition column or is used by
                a constraint, or every column would go.
        """
        with self.begin() as txn:
            txn.drop_columns(*names)
        return _version(txn)


def _version(txn: Transaction) -> int:
    result = txn.core.result
    assert result is not None
    return result.version


def _str_map(values: Mapping[str, Any] | None) -> dict[str, str] | None:
    if values is None:
        return None
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


_HISTORY_SCHEMA = (
    "version BIGINT, timestamp TIMESTAMP, operation STRING, "
    "operationParameters MAP<STRING, STRING>, readVersion BIGINT, isolationLevel STRING, "
    "isBlindAppend BOOLEAN, operationMetrics MAP<STRING, STRING>, userMetadata STRING, "
    "engineInfo STRING, txnId STRING"
)
_DETAIL_SCHEMA = (
    "format STRING, id STRING, name STRING, description STRING, location STRING, "
    "createdAt TIMESTAMP, lastModified TIMESTAMP, partitionColumns ARRAY<STRING>, "
    "numFiles BIGINT, sizeInBytes BIGINT, properties MAP<STRING, STRING>, "
    "minReaderVersion INT, minWriterVersion INT, tableFeatures ARRAY<STRING>, "
    "version BIGINT, isolationLevel STRING"
)


__all__ = ["DeltaTable", "MergeBuilder", "OptimizeBuilder", "Transaction", "spark_session", "write"]
