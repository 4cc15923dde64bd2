"""A transaction on a Delta table: statements staged on one pinned snapshot, one commit.

:class:`Transaction` is what ``DeltaTable.begin()`` returns. Each statement runs its read and
write phases when it is called (data files are written, nothing is visible); ``commit()``
validates and publishes them as one version. Begun with ``retries=N``, the recorded
statements are replayed on the latest snapshot when a conflict allows it
(:mod:`deltatx.reexecution`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType as SparkStructType

from deltatx.builders import MergeBuilder, OptimizeBuilder
from deltatx.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from deltatx.kernel.column_mapping import FEATURE as COLUMN_MAPPING
from deltatx.kernel.column_mapping import MODE_KEY, dropped, renamed
from deltatx.kernel.features import protocol_for_configuration
from deltatx.kernel.metrics import (
    DeleteMetrics,
    OptimizeMetrics,
    RestoreMetrics,
    UpdateMetrics,
)
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import validate_properties
from deltatx.kernel.schema import StructField, StructType
from deltatx.log.delta_log import DeltaLog
from deltatx.log.restore import stage_restore
from deltatx.log.snapshot import Snapshot
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import operation, step
from deltatx.reexecution import (
    Backoff,
    RecordedTransaction,
    Reexecution,
    StatementKind,
    Work,
    stabilise_source,
    statement_reason,
)
from deltatx.spark.commands.common import (
    parse_schema_argument,
    read_files,
)
from deltatx.spark.commands.constraints import (
    check_new_constraint_properties,
    stage_add_constraint,
    stage_drop_constraint,
)
from deltatx.spark.commands.delete import stage_delete
from deltatx.spark.commands.optimize import stage_compaction
from deltatx.spark.commands.update import stage_update
from deltatx.spark.commands.write import stage_write

Timestamp = int | str | datetime
T = TypeVar("T")
_RUN_REASON = (
    "it was staged through run(work), a function deltatx cannot check for determinism "
    "(pass statement= to declare it replayable)"
)


class Transaction:
    """An explicit transaction: a pinned snapshot, staged statements, one atomic commit.

    Use as a context manager to commit on success and abort on an exception::

        with dt.begin() as txn:
            txn.write(df, mode="append")
            txn.set_properties({"delta.appendOnly": "false"})

    Every staged statement is recorded (kind and arguments). Begun with ``retries=N``, a
    commit that conflicts starts a new transaction on the latest snapshot and replays the
    recorded statements in order, when every one qualifies (see :mod:`deltatx.reexecution`);
    the Python code of the ``with`` body is not run again.
    """

    def __init__(
        self,
        spark: SparkSession,
        log: DeltaLog,
        snapshot: Snapshot | None,
        *,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> None:
        """Pins ``snapshot`` (None for a table that does not exist yet)."""
        self._spark = spark
        self._recorded = RecordedTransaction(spark, log, snapshot, Reexecution.of(retries, backoff))
        self._alias: str | None = None

    @property
    def _txn(self) -> OptimisticTransaction:
        """The current attempt's transaction (a new one after each re-execution)."""
        return self._recorded.core

    @property
    def read_version(self) -> int:
        """The version this transaction read (-1 when it creates the table)."""
        return self._txn.read_version

    @property
    def path(self) -> str:
        """The path of the table this transaction writes."""
        return self._txn.log.table_path

    @property
    def core(self) -> OptimisticTransaction:
        """The engine-independent transaction underneath (read set, staged actions)."""
        return self._txn

    @property
    def attempts(self) -> int:
        """How many times the statements were executed (more than 1 after a re-execution)."""
        return len(self._recorded.read_versions)

    @property
    def read_versions(self) -> tuple[int, ...]:
        """The version each execution read, in order."""
        return self._recorded.read_versions

    def _stage(self, kind: StatementKind, work: Work, not_replayable: str | None) -> Any:
        return self._recorded.stage(kind, work, not_replayable)

    def stable_source(self, df: DataFrame, *, retries: int = 0) -> tuple[DataFrame, str | None]:
        """The DataFrame a statement should read: materialised once when it may be replayed.

        Raises:
            InvalidArgumentError: ``retries`` was given to a statement of a transaction.
        """
        _no_statement_retries(retries)
        if not self._recorded.policy.enabled:
            return df, None
        return stabilise_source(df, table_path=self._txn.log.table_path)

    def to_df(self) -> DataFrame:
        """The table as this transaction sees it: the pinned snapshot plus staged changes.

        A body that reads the table this way cannot be replayed by re-execution: what it did
        with the rows is not recorded.
        """
        if not self._txn.has_metadata:
            raise TableNotFoundError(f"there is no Delta table at {self._txn.log.table_path}")
        return cast(
            DataFrame,
            self._stage(
                StatementKind.READ,
                lambda spark, txn: read_files(spark, txn, txn.scan(None)),
                "the transaction read the table (to_df()), and what the body did with those "
                "rows cannot be replayed",
            ),
        )

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
        """Stages a write (see :func:`deltatx.write`); False when it was skipped.

        In a transaction begun with ``retries``, ``df`` is materialised first so that a
        replay writes the same rows.
        """
        reason = statement_reason(StatementKind.WRITE, [("replace_where condition", replace_where)])
        if reason is None:
            df, reason = self.stable_source(df)
        props = None if properties is None else dict(properties)
        parts = None if partition_by is None else list(partition_by)

        def work(spark: SparkSession, txn: OptimisticTransaction) -> bool:
            return stage_write(
                spark,
                txn,
                df,
                mode=mode,
                partition_by=parts,
                replace_where=replace_where,
                merge_schema=merge_schema,
                properties=props,
                app_id=app_id,
                app_version=app_version,
            )

        return bool(self._stage(StatementKind.WRITE, work, reason))

    def set_properties(self, properties: Mapping[str, Any]) -> None:
        """Stages table properties; invalid values are refused before anything is staged."""
        props = dict(properties)
        self._stage(
            StatementKind.SET_TBLPROPERTIES,
            lambda spark, txn: _set_properties(spark, txn, props),
            None,
        )

    def unset_properties(self, keys: Iterable[str], *, if_exists: bool = True) -> None:
        """Stages removal of table properties.

        Raises:
            InvalidArgumentError: A key is not set and ``if_exists`` is False.
        """
        names = list(keys)
        self._stage(
            StatementKind.UNSET_TBLPROPERTIES,
            lambda spark, txn: _unset_properties(txn, names, if_exists),
            None,
        )

    def add_constraint(self, name: str, expression: str) -> None:
        """Stages a CHECK constraint, e.g. ``add_constraint("positive", "v > 0")``.

        Every live row must already satisfy it; from then on every write is checked.

        Raises:
            InvalidArgumentError: The name is not an identifier or is already taken.
            InvalidConditionError: The expression is not a valid boolean on the table.
            ConstraintViolationError: An existing row breaks it (the message shows the row).
        """
        self._stage(
            StatementKind.ADD_CONSTRAINT,
            lambda spark, txn: stage_add_constraint(spark, txn, name, expression),
            None,
        )

    def drop_constraint(self, name: str, *, if_exists: bool = False) -> None:
        """Stages dropping the CHECK constraint ``name``.

        Raises:
            InvalidArgumentError: There is no such constraint and ``if_exists`` is False.
        """
        self._stage(
            StatementKind.DROP_CONSTRAINT,
            lambda spark, txn: stage_drop_constraint(txn, name, if_exists=if_exists),
            None,
        )

    def add_columns(self, columns: str | SparkStructType) -> None:
        """Stages new nullable columns, e.g. ``"extra STRING, n INT"``.

        Raises:
            InvalidArgumentError: A column already exists or the DDL does not parse.
        """
        self._stage(StatementKind.ADD_COLUMNS, lambda spark, txn: _add_columns(txn, columns), None)

    def rename_column(self, old: str, new: str) -> None:
        """Stages renaming column ``old`` to ``new``: a metadata-only change.

        Raises:
            UnsupportedFeatureError: The table does not use column mapping (the message says
                how to turn it on).
            SchemaMismatchError: ``old`` is not a column, ``new`` is taken, or a constraint
                names ``old``.
        """
        self._stage(
            StatementKind.RENAME_COLUMN, lambda spark, txn: _rename_column(txn, old, new), None
        )

    def drop_columns(self, *names: str) -> None:
        """Stages dropping columns: a metadata-only change (the data files keep them).

        Raises:
            UnsupportedFeatureError: The table does not use column mapping (the message says
                how to turn it on).
            SchemaMismatchError: A name is not a column, is a partition column, is named by a
                constraint, or every column would go.
        """
        columns = list(names)
        self._stage(
            StatementKind.DROP_COLUMNS, lambda spark, txn: _drop_columns(txn, columns), None
        )

    def alias(self, name: str) -> Transaction:
        """Names the target table for :meth:`merge` conditions (``t`` in ``t.id = s.id``)."""
        self._alias = name
        return self

    def delete(self, condition: str | Column | None = None) -> DeleteMetrics:
        """Stages a DELETE of the rows matching ``condition`` (all rows when None)."""
        reason = statement_reason(StatementKind.DELETE, [("condition", condition)])
        return cast(
            DeleteMetrics,
            self._stage(
                StatementKind.DELETE,
                lambda spark, txn: stage_delete(spark, txn, condition),
                reason,
            ),
        )

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
    ) -> UpdateMetrics:
        """Stages an UPDATE: ``set`` maps columns to SQL expressions or Columns."""
        if set is None:
            raise InvalidArgumentError("update needs set={column: expression}")
        assignments = dict(set)
        reason = statement_reason(
            StatementKind.UPDATE,
            [("condition", condition), *((f"SET {k}", v) for k, v in assignments.items())],
        )
        return cast(
            UpdateMetrics,
            self._stage(
                StatementKind.UPDATE,
                lambda spark, txn: stage_update(spark, txn, set=assignments, condition=condition),
                reason,
            ),
        )

    def merge(self, source: DataFrame, condition: str | Column) -> MergeBuilder:
        """Starts a MERGE of ``source`` into the table on ``condition``."""
        return MergeBuilder(self, source, condition, self._alias)

    def optimize(self) -> OptimizeBuilder:
        """Starts an OPTIMIZE (compaction or Z-order)."""
        return OptimizeBuilder(self)

    def reorg_purge(self) -> OptimizeMetrics:
        """REORG TABLE ... APPLY (PURGE): rewrites files that carry deletion vectors."""
        return cast(OptimizeMetrics, self._stage(StatementKind.REORG, _reorg_purge, None))

    def restore_to_version(
        self, version: int, *, allow_missing_files: bool = False
    ) -> RestoreMetrics:
        """Stages a RESTORE to ``version``."""
        return self._restore(version=version, allow_missing_files=allow_missing_files)

    def restore_to_timestamp(
        self, timestamp: Timestamp, *, allow_missing_files: bool = False
    ) -> RestoreMetrics:
        """Stages a RESTORE to the version current at ``timestamp``."""
        return self._restore(timestamp=timestamp, allow_missing_files=allow_missing_files)

    def _restore(
        self,
        *,
        version: int | None = None,
        timestamp: Timestamp | None = None,
        allow_missing_files: bool,
    ) -> RestoreMetrics:
        def work(spark: SparkSession, txn: OptimisticTransaction) -> RestoreMetrics:
            return stage_restore(
                txn, version=version, timestamp=timestamp, allow_missing_files=allow_missing_files
            )

        return cast(RestoreMetrics, self._stage(StatementKind.RESTORE, work, None))

    def run(
        self,
        work: Callable[[SparkSession, OptimisticTransaction], T],
        *,
        statement: StatementKind | None = None,
        not_replayable: str | None = None,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> T:
        """Runs one statement's staging inside this transaction.

        Args:
            work: Stages the statement.
            statement: Declares what ``work`` is; a declared statement is replayable (unless
                ``not_replayable`` says why not), an undeclared function is not.
            not_replayable: Why the statement cannot be replayed.
            retries: Only on :meth:`DeltaTable.run`; a transaction's are set by ``begin``.
            backoff: Likewise.

        Raises:
            InvalidArgumentError: ``retries`` or ``backoff`` was given.
        """
        _no_statement_retries(retries, backoff)
        if statement is None:
            return cast(T, self._stage(StatementKind.FUNCTION, work, _RUN_REASON))
        return cast(T, self._stage(statement, work, not_replayable))

    def commit(self) -> int:
        """Validates and publishes; returns the new version.

        Begun with ``retries=N``, a conflict that qualifies re-executes the recorded
        statements on the latest snapshot, up to N times (see :mod:`deltatx.reexecution`).

        Raises:
            ConcurrentModificationException: A concurrent commit conflicts (a documented
                subclass, with ``hint``); with retries, one that was not re-executed, with
                ``not_retried_because`` saying why.
        """
        with operation("COMMIT", self.path):
            step("committing")
            return self._recorded.commit()

    def _final(self, result: T) -> T:
        """The last execution's result of a one-statement transaction."""
        last = self._recorded.last_result
        return cast(T, self._recorded.stamp(last)) if last is not None else result

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


def _no_statement_retries(retries: int, backoff: Backoff | None = None) -> None:
    if retries != 0 or backoff is not None:
        raise InvalidArgumentError(
            "a statement inside a transaction is re-executed with the transaction: pass "
            "retries= (and backoff=) to begin(), not to the statement"
        )


def _set_properties(
    spark: SparkSession, txn: OptimisticTransaction, properties: Mapping[str, Any]
) -> None:
    _require_table(txn)
    updates = validate_properties(properties)
    if not updates:
        raise InvalidArgumentError("set_properties needs at least one property")
    check_new_constraint_properties(spark, txn, updates)
    config = {**txn.metadata.configuration, **updates}
    txn.update_metadata(replace(txn.metadata, configuration=config))
    txn.update_protocol(protocol_for_configuration(config, txn.protocol))
    txn.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {"properties": updates}), {})


def _unset_properties(txn: OptimisticTransaction, names: list[str], if_exists: bool) -> None:
    _require_table(txn)
    config = dict(txn.metadata.configuration)
    for key in names:
        if key not in config and not if_exists:
            raise InvalidArgumentError(f"table property '{key}' is not set")
        config.pop(key, None)
    txn.update_metadata(replace(txn.metadata, configuration=config))
    txn.record_operation(
        Operation(OperationName.UNSET_TBLPROPERTIES, {"properties": names, "ifExists": if_exists}),
        {},
    )


def _add_columns(txn: OptimisticTransaction, columns: str | SparkStructType) -> None:
    _require_table(txn)
    new = parse_schema_argument(columns)
    current = txn.schema
    fields = list(current.fields)
    for f in new.fields:
        if current.get(f.name) is not None:
            raise InvalidArgumentError(f"column '{f.name}' already exists")
        fields.append(StructField(f.name, f.type, True, f.metadata))
    schema = StructType(tuple(fields))
    txn.update_metadata(replace(txn.metadata, schema_string=schema.to_json()))
    txn.record_operation(
        Operation(OperationName.ADD_COLUMNS, {"columns": [f.name for f in new.fields]}), {}
    )


def _require_column_mapping(txn: OptimisticTransaction, what: str) -> None:
    if not txn.configuration.column_mapping:
        raise UnsupportedFeatureError(
            f"{what} needs column mapping, and the table at {txn.log.table_path} does not use "
            f"it; turn it on first with dt.set_properties({{'{MODE_KEY}': 'name'}}) (SQL: ALTER "
            f"TABLE ... SET TBLPROPERTIES ('{MODE_KEY}' = 'name')). Nothing was committed.",
            feature=COLUMN_MAPPING,
        )


def _refuse_constrained(txn: OptimisticTransaction, column: str, what: str) -> None:
    # A constraint names columns by their logical names: renaming or dropping one would leave
    # an expression that no longer resolves.
    pattern = re.compile(rf"(?<![\w.]){re.escape(column)}(?!\w)|`{re.escape(column)}`", re.I)
    for name, expression in txn.configuration.constraint_checks:
        if pattern.search(expression):
            raise SchemaMismatchError(
                f"cannot {what} column '{column}': the table's {name} ({expression}) uses it; "
                "drop the constraint first. Nothing was committed.",
                column=column,
            )


def _rename_column(txn: OptimisticTransaction, old: str, new: str) -> None:
    _require_table(txn)
    _require_column_mapping(txn, "renaming a column")
    field = txn.schema.get(old)
    if field is not None:
        _refuse_constrained(txn, field.name, "rename")
    schema = renamed(txn.schema, old, new)
    partitions = tuple(
        new if field is not None and c.lower() == field.name.lower() else c
        for c in txn.partition_columns
    )
    txn.update_metadata(
        replace(txn.metadata, schema_string=schema.to_json(), partition_columns=partitions)
    )
    assert field is not None  # renamed() refuses an unknown column
    txn.record_operation(
        Operation(OperationName.RENAME_COLUMN, {"oldColumnPath": field.name, "newColumnPath": new}),
        {},
    )


def _drop_columns(txn: OptimisticTransaction, names: list[str]) -> None:
    _require_table(txn)
    _require_column_mapping(txn, "dropping a column")
    partitions = {c.lower() for c in txn.partition_columns}
    for name in names:
        field = txn.schema.get(name)
        if field is None:
            continue  # dropped() names it
        if field.name.lower() in partitions:
            raise SchemaMismatchError(
                f"cannot drop partition column '{field.name}'; a table's partitioning cannot "
                "change. Nothing was committed.",
                column=field.name,
            )
        _refuse_constrained(txn, field.name, "drop")
    schema = dropped(txn.schema, names)
    gone = [f.name for f in txn.schema.fields if f.name not in schema.field_names()]
    txn.update_metadata(replace(txn.metadata, schema_string=schema.to_json()))
    txn.record_operation(Operation(OperationName.DROP_COLUMNS, {"columns": gone}), {})


def _reorg_purge(spark: SparkSession, txn: OptimisticTransaction) -> OptimizeMetrics:
    files = [f for f in txn.scan(None) if f.deletion_vector is not None]
    return stage_compaction(spark, txn, files=files, operation=OperationName.REORG)
