"""ADD CONSTRAINT, DROP CONSTRAINT and CHECK constraints set as table properties.

A CHECK constraint may only be added when every live row of the table already satisfies it;
the check reads the whole table inside the transaction, so a concurrent write of rows the
check did not see makes the commit conflict instead of slipping an unchecked row in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import ConstraintViolationError, InvalidConditionError, TableNotFoundError
from deltatx.kernel.features import protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import CONSTRAINT_PREFIX
from deltatx.kernel.table_configuration import with_check_constraint, without_check_constraint
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import read_files, validate_condition


def first_violation(df: DataFrame, expression: str) -> dict[str, object] | None:
    """The first row for which ``expression`` is false or NULL, or None when all satisfy it.

    A NULL result breaks a CHECK constraint, as delta-spark treats it.
    """
    rows = df.filter(~F.coalesce(F.expr(expression), F.lit(False))).limit(1).collect()
    return rows[0].asDict() if rows else None


def check_existing_rows(
    spark: SparkSession, txn: OptimisticTransaction, name: str, expression: str
) -> None:
    """Refuses a new CHECK constraint that a live row of the table already breaks.

    Raises:
        InvalidConditionError: The expression does not resolve against the table or is not a
            boolean.
        ConstraintViolationError: A row breaks it; the message shows the row.
    """
    validate_condition(spark, txn, expression)
    files = txn.scan(None)
    if not files:
        return
    row = first_violation(read_files(spark, txn, files), expression)
    if row is not None:
        raise ConstraintViolationError(
            f"cannot add CHECK constraint '{name}' ({expression}): the table has a row that "
            f"breaks it: {row}. Nothing was changed.",
            constraint=name,
        )


def stage_add_constraint(
    spark: SparkSession, txn: OptimisticTransaction, name: str, expression: str
) -> None:
    """Stages ``ALTER TABLE ADD CONSTRAINT name CHECK (expression)``.

    Raises:
        TableNotFoundError: There is no table.
        InvalidArgumentError: The name is not an identifier or is taken.
        InvalidConditionError: The expression is not a valid boolean on the table.
        ConstraintViolationError: An existing row breaks it.
    """
    _require_table(txn)
    config = with_check_constraint(txn.metadata.configuration, name, expression)
    check_existing_rows(spark, txn, name, expression)
    _stage_configuration(txn, config)
    txn.record_operation(
        Operation(OperationName.ADD_CONSTRAINT, {"name": name, "expr": expression}), {}
    )


def stage_drop_constraint(txn: OptimisticTransaction, name: str, *, if_exists: bool) -> None:
    """Stages ``ALTER TABLE DROP CONSTRAINT [IF EXISTS] name``.

    Raises:
        TableNotFoundError: There is no table.
        InvalidArgumentError: There is no such constraint and ``if_exists`` is False.
    """
    _require_table(txn)
    config = without_check_constraint(txn.metadata.configuration, name, if_exists=if_exists)
    if config is not None:
        _stage_configuration(txn, config)
    txn.record_operation(Operation(OperationName.DROP_CONSTRAINT, {"name": name}), {})


def check_new_constraint_properties(
    spark: SparkSession, txn: OptimisticTransaction, updates: Mapping[str, str]
) -> None:
    """Checks the existing rows against CHECK constraints that properties add or change.

    Raises:
        InvalidConditionError: An expression is not a valid boolean on the table.
        ConstraintViolationError: An existing row breaks one.
    """
    current = txn.metadata.configuration
    for key, expression in updates.items():
        if key.startswith(CONSTRAINT_PREFIX) and current.get(key) != expression:
            name = key[len(CONSTRAINT_PREFIX) :]
            try:
                check_existing_rows(spark, txn, name, expression)
            except InvalidConditionError as exc:
                raise InvalidConditionError(f"CHECK constraint '{name}': {exc}") from None


def _stage_configuration(txn: OptimisticTransaction, config: dict[str, str]) -> None:
    txn.update_metadata(replace(txn.metadata, configuration=config))
    txn.update_protocol(protocol_for_configuration(config, txn.protocol))


def _require_table(txn: OptimisticTransaction) -> None:
    if not txn.has_metadata:
        raise TableNotFoundError(f"there is no Delta table at {txn.log.table_path}")
