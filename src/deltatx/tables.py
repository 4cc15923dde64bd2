"""The public facade: :class:`DeltaTable`, :class:`Transaction` and :func:`write`.

A DeltaTable is a handle, not a snapshot: each call works on the latest version at the time
of the call. A Transaction pins one snapshot, stages any number of statements (each sees the
earlier ones' changes) and publishes them as one version on :meth:`Transaction.commit`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType as SparkStructType

from deltatx.builders import MergeBuilder, OptimizeBuilder
from deltatx.catalog import table_path
from deltatx.delta_spark_names import DeltaTableNames
from deltatx.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from deltatx.kernel.actions import Metadata
from deltatx.kernel.features import protocol_for_configuration, reader_features, writer_features
from deltatx.kernel.metrics import (
    DeleteMetrics,
    OptimizeMetrics,
    RestoreMetrics,
    UpdateMetrics,
    VacuumMetrics,
)
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import validate_properties
from deltatx.kernel.schema import StructField, StructType
from deltatx.log.delta_log import DeltaLog
from deltatx.log.restore import stage_restore
from deltatx.log.snapshot import Snapshot
from deltatx.log.transaction import OptimisticTransaction
from deltatx.log.vacuum import vacuum
from deltatx.spark.commands.common import (
    new_table_actions,
    parse_schema_argument,
    read_files,
)
from deltatx.spark.commands.delete import stage_delete
from deltatx.spark.commands.optimize import stage_compaction
from deltatx.spark.commands.update import stage_update
from deltatx.spark.commands.write import stage_write
from deltatx.spark.session import spark_session

Timestamp = int | str | datetime
T = TypeVar("T")


class Transaction:
    """An explicit transaction: a pinned snapshot, staged statements, one atomic commit.

    Use as a context manager to commit on success and abort on an exception::

        with dt.begin() as txn:
            txn.write(df, mode="append")
            txn.set_properties({"delta.appendOnly": "false"})
    """

    def __init__(self, spark: SparkSession, log: DeltaLog, snapshot: Snapshot | None) -> None:
        """Pins ``snapshot`` (None for a table that does not exist yet)."""
        self._spark = spark
        self._txn = OptimisticTransaction(log, snapshot)
        self._alias: str | None = None

    @property
    def read_version(self) -> int:
        """The version this transaction read (-1 when it creates the table)."""
        return self._txn.read_version

    @property
    def core(self) -> OptimisticTransaction:
        """The engine-independent transaction underneath (read set, staged actions)."""
        return self._txn

    def to_df(self) -> DataFrame:
        """The table as this transaction sees it: the pinned snapshot plus staged changes."""
        if not self._txn.has_metadata:
            raise TableNotFoundError(f"there is no Delta table at {self._txn.log.table_path}")
        return read_files(self._spark, self._txn, self._txn.scan(None))

    def write(
        self,
        df: DataFrame,
        *,
        mode: str = "append",
        partition_by: Sequence[str] | None = None,
        replace_where: str | None = None,
        merge_schema: bool = False,
        properties: Mapping[str, Any] | None = None,
        app_id: str | None = None,
        app_version: int | None = None,
    ) -> bool:
        """Stages a write (see :func:`deltatx.write`); False when it was skipped."""
        return stage_write(
            self._spark,
            self._txn,
            df,
            mode=mode,
            partition_by=partition_by,
            replace_where=replace_where,
            merge_schema=merge_schema,
            properties=properties,
            app_id=app_id,
            app_version=app_version,
        )

    def set_properties(self, properties: Mapping[str, Any]) -> None:
        """Stages table properties; invalid values are refused before anything is staged."""
        _require_table(self._txn)
        updates = validate_properties(properties)
        if not updates:
            raise InvalidArgumentError("set_properties needs at least one property")
        config = {**self._txn.metadata.configuration, **updates}
        self._txn.update_metadata(replace(self._txn.metadata, configuration=config))
        self._txn.update_protocol(protocol_for_configuration(config, self._txn.protocol))
        self._txn.record_operation(
            Operation(OperationName.SET_TBLPROPERTIES, {"properties": updates}), {}
        )

    def unset_properties(self, keys: Iterable[str], *, if_exists: bool = True) -> None:
        """Stages removal of table properties.

        Raises:
            InvalidArgumentError: A key is not set and ``if_exists`` is False.
        """
        _require_table(self._txn)
        config = dict(self._txn.metadata.configuration)
        names = list(keys)
        for key in names:
            if key not in config and not if_exists:
                raise InvalidArgumentError(f"table property '{key}' is not set")
            config.pop(key, None)
        self._txn.update_metadata(replace(self._txn.metadata, configuration=config))
        self._txn.record_operation(
            Operation(
                OperationName.UNSET_TBLPROPERTIES, {"properties": names, "ifExists": if_exists}
            ),
            {},
        )

    def add_columns(self, columns: str | SparkStructType) -> None:
        """Stages new nullable columns, e.g. ``"extra STRING, n INT"``.

        Raises:
            InvalidArgumentError: A column already exists or the DDL does not parse.
        """
        _require_table(self._txn)
        new = parse_schema_argument(columns)
        current = self._txn.schema
        fields = list(current.fields)
        for f in new.fields:
            if current.get(f.name) is not None:
                raise InvalidArgumentError(f"column '{f.name}' already exists")
            fields.append(StructField(f.name, f.type, True, f.metadata))
        schema = StructType(tuple(fields))
        self._txn.update_metadata(replace(self._txn.metadata, schema_string=schema.to_json()))
        self._txn.record_operation(
            Operation(OperationName.ADD_COLUMNS, {"columns": [f.name for f in new.fields]}), {}
        )

    def alias(self, name: str) -> Transaction:
        """Names the target table for :meth:`merge` conditions (``t`` in ``t.id = s.id``)."""
        self._alias = name
        return self

    def delete(self, condition: str | Column | None = None) -> DeleteMetrics:
        """Stages a DELETE of the rows matching ``condition`` (all rows when None)."""
        return stage_delete(self._spark, self._txn, condition)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
    ) -> UpdateMetrics:
        """Stages an UPDATE: ``set`` maps columns to SQL expressions or Columns."""
        if set is None:
            raise InvalidArgumentError("update needs set={column: expression}")
        return stage_update(self._spark, self._txn, set=set, condition=condition)

    def merge(self, source: DataFrame, condition: str | Column) -> MergeBuilder:
        """Starts a MERGE of ``source`` into the table on ``condition``."""
        return MergeBuilder(self, source, condition, self._alias)

    def optimize(self) -> OptimizeBuilder:
        """Starts an OPTIMIZE (compaction or Z-order)."""
        return OptimizeBuilder(self)

    def reorg_purge(self) -> OptimizeMetrics:
        """REORG TABLE ... APPLY (PURGE): rewrites files that carry deletion vectors."""
        files = [f for f in self._txn.scan(None) if f.deletion_vector is not None]
        return stage_compaction(self._spark, self._txn, files=files, operation=OperationName.REORG)

    def restore_to_version(self, version: int) -> RestoreMetrics:
        """Stages a RESTORE to ``version``."""
        return stage_restore(self._txn, version=version)

    def restore_to_timestamp(self, timestamp: Timestamp) -> RestoreMetrics:
        """Stages a RESTORE to the version current at ``timestamp``."""
        return stage_restore(self._txn, timestamp=timestamp)

    def run(self, work: Callable[[SparkSession, OptimisticTransaction], T]) -> T:
        """Runs one statement's staging inside this transaction."""
        return work(self._spark, self._txn)

    def commit(self) -> int:
        """Validates and publishes; returns the new version.

        Raises:
            ConcurrentModificationException: A concurrent commit conflicts (a documented
                subclass, with ``hint``).
        """
        return self._txn.commit()

    def abort(self) -> None:
        """Drops the staged work; files already written stay invisible until VACUUM."""
        self._txn.abort()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _require_table(txn: OptimisticTransaction) -> None:
    if not txn.has_metadata:
        raise TableNotFoundError(f"there is no Delta table at {txn.log.table_path}")


class DeltaTable(DeltaTableNames):
    """A handle on a Delta table at a path."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        """Use :meth:`for_path` or :meth:`create`; this does not check that a table exists."""
        self._spark = spark
        self._log = DeltaLog.for_table(path)
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
    ) -> DeltaTable:
        """Creates an empty table.

        Raises:
            TableAlreadyExistsError: A table exists at ``path`` (unless ``if_not_exists``).
            InvalidPropertyError: A property value is not allowed; nothing is written.
        """
        table = cls(spark, path)
        if table._log.table_exists():
            if if_not_exists:
                return table
            raise TableAlreadyExistsError(f"a Delta table already exists at {table.path}")
        metadata, protocol = new_table_actions(
            parse_schema_argument(schema),
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
        txn.commit()
        return table

    def begin(self) -> Transaction:
        """Starts a transaction pinned to the latest version."""
        txn = Transaction(self._spark, self._log, self._refresh())
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
        return self._log.snapshot(version, timestamp=timestamp)

    def to_df(self, *, version: int | None = None, timestamp: Timestamp | None = None) -> DataFrame:
        """The table as a DataFrame, pinned to a version (default: the latest now)."""
        snap = self.snapshot(version, timestamp=timestamp)
        txn = OptimisticTransaction(self._log, snap)
        return read_files(self._spark, txn, snap.add_files())

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
        features = sorted(reader_features(snap.protocol) | writer_features(snap.protocol))
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
            snap.properties.isolation_level.value,
        )
        return self._spark.createDataFrame([row], _DETAIL_SCHEMA)

    def run(self, work: Callable[[SparkSession, OptimisticTransaction], T]) -> T:
        """Runs one statement in a transaction of its own and commits it."""
        with self.begin() as txn:
            return txn.run(work)

    def alias(self, name: str) -> DeltaTable:
        """A handle whose MERGE conditions call the table ``name``."""
        other = DeltaTable(self._spark, self.path)
        other._alias = name
        return other

    def delete(self, condition: str | Column | None = None) -> DeleteMetrics:
        """Deletes the rows matching ``condition`` (all rows when None) in one commit."""
        with self.begin() as txn:
            return txn.delete(condition)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
    ) -> UpdateMetrics:
        """Updates the rows matching ``condition``: ``set`` maps columns to expressions."""
        with self.begin() as txn:
            return txn.update(condition, set)

    def merge(self, source: DataFrame, condition: str | Column) -> MergeBuilder:
        """Starts a MERGE of ``source`` into this table on ``condition``."""
        return MergeBuilder(self, source, condition, self._alias)

    def optimize(self) -> OptimizeBuilder:
        """Starts an OPTIMIZE (compaction or Z-order)."""
        return OptimizeBuilder(self)

    def reorg_purge(self) -> OptimizeMetrics:
        """REORG TABLE ... APPLY (PURGE): rewrites the files that carry deletion vectors."""
        with self.begin() as txn:
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

    def restore_to_version(self, version: int) -> RestoreMetrics:
        """Restores the table to ``version`` in a new commit."""
        with self.begin() as txn:
            return txn.restore_to_version(version)

    def restore_to_timestamp(self, timestamp: Timestamp) -> RestoreMetrics:
        """Restores the table to the version current at ``timestamp`` in a new commit."""
        with self.begin() as txn:
            return txn.restore_to_timestamp(timestamp)

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

    def add_columns(self, columns: str | SparkStructType) -> int:
        """Adds nullable columns in a commit of their own; returns the version."""
        with self.begin() as txn:
            txn.add_columns(columns)
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


def write(
    df: DataFrame,
    path: str,
    *,
    mode: str = "append",
    partition_by: Sequence[str] | None = None,
    replace_where: str | None = None,
    merge_schema: bool = False,
    properties: Mapping[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
) -> int | None:
    """Writes a DataFrame to the Delta table at ``path``, creating it if needed.

    Args:
        df: The data; written by Spark on the executors.
        path: The table root.
        mode: ``append``, ``overwrite``, ``error`` or ``ignore``.
        partition_by: Partition columns of a new table (must match an existing table's).
        replace_where: With ``overwrite``: replace only the rows matching this condition.
        merge_schema: Add the data's new columns to the table schema.
        properties: Table properties to set.
        app_id: With ``app_version``, makes the write idempotent for that application.
        app_version: The application's version of this write.

    Returns:
        The committed version, or None when the write was skipped.
    """
    spark = df.sparkSession
    log = DeltaLog.for_table(path)
    snapshot = log.snapshot() if log.table_exists() else None
    txn = Transaction(spark, log, snapshot)
    try:
        staged = txn.write(
            df,
            mode=mode,
            partition_by=partition_by,
            replace_where=replace_where,
            merge_schema=merge_schema,
            properties=properties,
            app_id=app_id,
            app_version=app_version,
        )
    except BaseException:
        txn.abort()
        raise
    if not staged:
        txn.abort()
        return None
    return txn.commit()


__all__ = ["DeltaTable", "MergeBuilder", "OptimizeBuilder", "Transaction", "spark_session", "write"]
