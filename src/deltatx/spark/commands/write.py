"""The WRITE command: append, overwrite (whole table or ``replace_where``), error, ignore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import (
    InvalidArgumentError,
    TableAlreadyExistsError,
)
from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Expression, to_sql
from deltatx.kernel.features import protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import validate_properties
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import (
    check_allowed,
    condition_column,
    condition_to_predicate,
    covers_whole_files,
    file_metrics,
    fill_generated_columns,
    new_table_actions,
    read_files,
    to_delta_schema,
    write_data,
)
from deltatx.spark.commands.constraints import check_new_constraint_properties
from deltatx.spark.schema import check_write_schema


class SaveMode(StrEnum):
    """What a write does when the table already exists."""

    APPEND = "append"
    OVERWRITE = "overwrite"
    ERROR = "error"
    IGNORE = "ignore"


def parse_mode(mode: str) -> SaveMode:
    """Parses a save mode; ``errorifexists`` is accepted for ``error``.

    Raises:
        InvalidArgumentError: The mode is not one of the four.
    """
    lowered = mode.lower()
    if lowered == "errorifexists":
        lowered = "error"
    try:
        return SaveMode(lowered)
    except ValueError:
        allowed = ", ".join(m.value for m in SaveMode)
        raise InvalidArgumentError(f"unknown save mode '{mode}'; use one of {allowed}") from None


def stage_write(
    spark: SparkSession,
    txn: OptimisticTransaction,
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
    """Stages a write into ``txn``; returns False when the write is skipped.

    The write is skipped for mode ``ignore`` on an existing table, and when ``app_id`` has
    already committed ``app_version`` or a later one (idempotent writes).

    Raises:
        TableAlreadyExistsError: Mode ``error`` and the table exists.
        SchemaMismatchError: The data does not match the table schema.
        InvalidArgumentError: Contradictory options.
    """
    save_mode = parse_mode(mode)
    if (app_id is None) != (app_version is None):
        raise InvalidArgumentError("app_id and app_version go together: give both or neither")
    if app_version is not None and app_version < 0:
        raise InvalidArgumentError(f"app_version must be >= 0, got {app_version}")
    if replace_where is not None and save_mode is not SaveMode.OVERWRITE:
        raise InvalidArgumentError("replace_where needs mode='overwrite'")
    exists = txn.has_metadata
    if exists and save_mode is SaveMode.ERROR:
        raise TableAlreadyExistsError(f"a Delta table already exists at {txn.log.table_path}")
    if exists and save_mode is SaveMode.IGNORE:
        return False
    if app_id is not None and app_version is not None:
        done = txn.app_transaction_version(app_id)
        if done is not None and done >= app_version:
            return False
    df = fill_generated_columns(txn, df)
    data_schema = to_delta_schema(df.schema)
    props = validate_properties(properties or {})
    if not exists:
        metadata, protocol = new_table_actions(
            data_schema, partition_by=list(partition_by or ()), properties=props
        )
        txn.update_protocol(protocol)
        txn.update_metadata(metadata)
    else:
        _check_partitioning(txn, partition_by)
        evolved = check_write_schema(txn.schema, data_schema, merge_schema=merge_schema)
        if evolved is not None or props:
            check_new_constraint_properties(spark, txn, props)
            config = {**txn.metadata.configuration, **props}
            new_md = replace(
                txn.metadata,
                schema_string=(evolved or txn.schema).to_json(),
                configuration=config,
            )
            txn.update_metadata(new_md)
            txn.update_protocol(protocol_for_configuration(config, txn.protocol))
    check_allowed(
        txn,
        OperationName.WRITE,
        deletes_rows=exists and save_mode is SaveMode.OVERWRITE,
    )
    # write_files conforms the data to the table schema (order, names, casts); the schema
    # check above has already refused missing or incompatible columns.

    deleted_rows = 0
    removed_files = 0
    predicate_sql: str | None = None
    if exists and save_mode is SaveMode.OVERWRITE:
        if replace_where is None:
            old = txn.scan(None)
            txn.remove_files(old)
            removed_files = len(old)
            deleted_rows, _ = file_metrics(old)
        else:
            predicate = condition_to_predicate(replace_where, schema=txn.schema)
            assert predicate is not None
            predicate_sql = to_sql(predicate)
            cond = condition_column(replace_where)
            outside = df.filter(~F.coalesce(cond, F.lit(False))).limit(1).count()
            if outside:
                raise InvalidArgumentError(
                    f"the data to write has rows that do not satisfy replace_where "
                    f"'{replace_where}'; nothing was written"
                )
            candidates = txn.scan(predicate)
            keep = _rows_to_keep(spark, txn, candidates, predicate, cond)
            txn.remove_files(candidates)
            removed_files = len(candidates)
            kept: list[AddFile] = []
            if keep is not None:
                kept = write_data(txn, keep)
                txn.add_files(kept)
            # The replaced rows: those the candidates held, less those written back.
            deleted_rows = file_metrics(candidates)[0] - file_metrics(kept)[0]
    added = write_data(txn, df)
    txn.add_files(added)
    if app_id is not None and app_version is not None:
        txn.set_app_transaction(app_id, app_version)
    rows, size = file_metrics(added)
    params: dict[str, Any] = {
        "mode": "Overwrite" if save_mode is SaveMode.OVERWRITE and exists else "Append",
        "partitionBy": list(txn.partition_columns),
    }
    if predicate_sql is not None:
        params["predicate"] = [predicate_sql]
    txn.record_operation(
        Operation(OperationName.WRITE, params),
        {
            "numFiles": len(added),
            "numOutputRows": rows,
            "numOutputBytes": size,
            "numRemovedFiles": removed_files,
            "numDeletedRows": deleted_rows,
        },
    )
    return True


def _check_partitioning(txn: OptimisticTransaction, partition_by: Sequence[str] | None) -> None:
    if partition_by is None:
        return
    current = [c.lower() for c in txn.partition_columns]
    if [c.lower() for c in partition_by] != current:
        raise InvalidArgumentError(
            f"partition_by {list(partition_by)} differs from the table's partition columns "
            f"{list(txn.partition_columns)}; a table's partitioning cannot change on write"
        )


def _rows_to_keep(
    spark: SparkSession,
    txn: OptimisticTransaction,
    files: Sequence[AddFile],
    predicate: Expression,
    cond: Column,
) -> DataFrame | None:
    """Rows of ``files`` that ``replace_where`` does not cover, or None if there are none.

    A predicate only on partition columns covers whole files, so nothing is read.
    """
    if not files or covers_whole_files(predicate, txn.partition_columns):
        return None
    return read_files(spark, txn, files).filter(~F.coalesce(cond, F.lit(False)))
