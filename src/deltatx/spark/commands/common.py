"""What the commands share: schema conversion, metadata creation, condition parsing."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType as SparkDataType
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import (
    ConstraintViolationError,
    InvalidArgumentError,
    InvalidConditionError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import AddFile, Metadata, ProtocolAction
from deltatx.kernel.column_mapping import without_mapping
from deltatx.kernel.commit_rules import check_allowed as check_allowed_by_configuration
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.expressions import (
    Expression,
    columns_of,
    has_opaque,
    to_sql,
)
from deltatx.kernel.features import (
    DEFAULT_PROTOCOL,
    protocol_for_configuration,
    protocol_with_features,
    schema_features,
)
from deltatx.kernel.metrics import CommandMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import TableProperties, validate_properties
from deltatx.kernel.schema import PrimitiveType, StructType, parse_schema
from deltatx.kernel.table_configuration import (
    GeneratedColumn,
    generated_columns,
    identity_columns,
)
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.expressions import parse_condition
from deltatx.spark.scan import files_to_dataframe
from deltatx.spark.write import write_files

M = TypeVar("M", bound=CommandMetrics)
DV_PROPERTY = "delta.enableDeletionVectors"
FEATURES_PROTOCOL = ProtocolAction(
    min_reader_version=3, min_writer_version=7, reader_features=(), writer_features=()
)


def to_delta_schema(schema: SparkStructType) -> StructType:
    """A data schema as the Delta schema model (the JSON forms are the same).

    Column mapping metadata of the table the data was read from is dropped: a table assigns
    its own ids and physical names.
    """
    return without_mapping(parse_schema(schema.json()))


def to_spark_schema(schema: StructType) -> SparkStructType:
    """A Delta schema as a Spark StructType."""
    result = SparkStructType.fromJson(json.loads(schema.to_json()))
    assert isinstance(result, SparkStructType)
    return result


def parse_schema_argument(schema: str | SparkStructType | StructType) -> StructType:
    """Accepts a DDL string (``"id BIGINT, v DOUBLE"``), a Spark or a Delta StructType.

    Raises:
        InvalidArgumentError: The DDL does not parse or is not a struct.
    """
    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, SparkStructType):
        return to_delta_schema(schema)
    try:
        parsed = SparkDataType.fromDDL(schema)
    except Exception as exc:
        raise InvalidArgumentError(f"schema {schema!r} does not parse: {exc}") from None
    if not isinstance(parsed, SparkStructType):
        raise InvalidArgumentError(f"schema {schema!r} must describe columns, not a single type")
    return to_delta_schema(parsed)


def new_table_actions(
    schema: StructType,
    *,
    partition_by: Sequence[str],
    properties: Mapping[str, Any] | None,
    name: str | None = None,
    description: str | None = None,
) -> tuple[Metadata, ProtocolAction]:
    """The metadata and protocol of a new table, validated.

    Raises:
        InvalidArgumentError: A partition column is not in the schema, or is complex.
        InvalidPropertyError: A property value is not allowed.
    """
    names = {f.name.lower(): f.name for f in schema.fields}
    columns: list[str] = []
    for col in partition_by:
        if col.lower() not in names:
            raise InvalidArgumentError(
                f"partition column '{col}' is not in the schema ({', '.join(names.values())})"
            )
        field = schema.get(col)
        assert field is not None
        if not isinstance(field.type, PrimitiveType):
            raise InvalidArgumentError(f"partition column '{col}' must have a primitive type")
        columns.append(names[col.lower()])
    if len(columns) == len(schema.fields) and columns:
        raise InvalidArgumentError("a table cannot be partitioned by all of its columns")
    # New tables get deletion vectors unless told otherwise, as current Databricks does: DML
    # then marks rows instead of rewriting files, and row-level concurrency applies.
    requested = dict(properties or {})
    if not any(k.lower() == DV_PROPERTY.lower() for k in requested):
        requested[DV_PROPERTY] = "true"
    config = validate_properties(requested)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema.to_json(),
        partition_columns=tuple(columns),
        configuration=config,
        name=name,
        description=description,
        created_time=int(time.time() * 1000),
    )
    dv_on = TableProperties.from_configuration(config).enable_deletion_vectors
    # A table born with a reader-writer feature starts at (3, 7) naming only what it uses,
    # rather than carrying the legacy (1, 2) implied features into the lists.
    base = FEATURES_PROTOCOL if dv_on else DEFAULT_PROTOCOL
    _check_generated_columns(schema)
    protocol = protocol_with_features(
        protocol_for_configuration(config, base), schema_features(metadata.schema_string)
    )
    return metadata, protocol


def _check_generated_columns(schema: StructType) -> bool:
    """Whether a new table's schema declares generated columns; refuses identity columns.

    Raises:
        UnsupportedFeatureError: The schema declares an identity column.
        InvalidConditionError: A generation expression does not resolve against the schema.
    """
    identities = identity_columns(schema)
    if identities:
        raise UnsupportedFeatureError(
            f"column '{identities[0]}' is an identity column; deltatx does "
            "not write identity columns yet (tables other engines create with them stay "
            "readable). Nothing was created.",
            feature="identityColumns",
        )
    generated = generated_columns(schema)
    spark = SparkSession.getActiveSession()
    if generated and spark is not None:
        frame = empty_table_frame(spark, schema)
        for g in generated:
            try:
                frame.select(F.expr(g.expression)).schema  # noqa: B018 (analysis only)
            except Exception as exc:
                raise InvalidConditionError(
                    f"the expression of generated column '{g.column}' ({g.expression}) is not "
                    f"valid: {_first_line(exc)}"
                ) from None
    return bool(generated)


def fill_generated_columns(txn: OptimisticTransaction, df: DataFrame) -> DataFrame:
    """Adds the generated columns the data lacks, computed from the row's other columns."""
    if not txn.has_metadata:
        return df
    present = {c.lower() for c in df.columns}
    for g in txn.configuration.generated_columns:
        if g.column.lower() not in present:
            df = df.withColumn(g.column, _generated_value(txn, g))
    return df


def _generated_value(txn: OptimisticTransaction, g: GeneratedColumn) -> Column:
    field = txn.schema.get(g.column)
    assert field is not None
    return F.expr(g.expression).cast(to_spark_schema(StructType((field,))).fields[0].dataType)


def _apply_generated_columns(
    txn: OptimisticTransaction, df: DataFrame, *, recompute: bool
) -> DataFrame:
    """Computes (``recompute``) or verifies the generated columns of rows about to be written.

    Raises:
        ConstraintViolationError: A supplied value differs from its generation expression.
    """
    df = fill_generated_columns(txn, df)
    for g in txn.configuration.generated_columns:
        value = _generated_value(txn, g)
        if recompute:
            df = df.withColumn(g.column, value)
            continue
        bad = df.filter(~F.col(g.column).eqNullSafe(value)).limit(1).collect()
        if bad:
            raise ConstraintViolationError(
                f"generated column '{g.column}' must equal {g.expression}, but the row "
                f"{bad[0].asDict()} supplies another value; leave the column out to have it "
                "computed. Nothing was written.",
                constraint=f"generated column '{g.column}'",
            )
    return df


def check_allowed(
    txn: OptimisticTransaction, operation: OperationName, *, deletes_rows: bool
) -> None:
    """Refuses a command the table's configuration forbids, before any data file is written.

    The same rules run again at commit (the last gate); checking here first means a refused
    command leaves no orphan files under the table root.

    Raises:
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support.
        AppendOnlyViolationError: The table is append-only and the command deletes rows.
    """
    if not txn.has_metadata:
        return
    check_allowed_by_configuration(
        txn.configuration, operation, deletes_rows=deletes_rows, table=f"table {txn.log.table_path}"
    )


def write_data(
    txn: OptimisticTransaction, df: DataFrame, *, recompute_generated: bool = False
) -> list[AddFile]:
    """Writes rows as data files of the table, once they satisfy the table's constraints.

    Every command that writes rows goes through here, so the table's generated columns,
    invariants and CHECK constraints hold on everything deltatx writes; the transaction
    remembers which files were checked, and the commit refuses any other added file on a table
    with constraints.

    Args:
        txn: The transaction the files are for.
        df: The rows.
        recompute_generated: Compute every generated column afresh (UPDATE and MERGE, whose
            rows may have changed the columns an expression reads) instead of verifying the
            values the rows supply.

    Raises:
        ConstraintViolationError: A row breaks a constraint or supplies a generated value
            that differs from its expression; nothing was written.
        UnsupportedFeatureError: Spark cannot evaluate a constraint's expression.
    """
    if txn.has_metadata and txn.configuration.generated_columns:
        df = _apply_generated_columns(txn, df, recompute=recompute_generated)
    checks = txn.configuration.constraint_checks
    for name, expression in checks:
        try:
            violating = df.filter(~F.coalesce(F.expr(expression), F.lit(False))).limit(1).collect()
        except Exception as exc:
            raise UnsupportedFeatureError(
                f"the table's {name} ({expression}) cannot be evaluated on the rows to write "
                f"({_first_line(exc)}); nothing was written.",
                feature="invariants" if name.startswith("invariant") else "checkConstraints",
            ) from None
        if violating:
            raise ConstraintViolationError(
                f"the {name} ({expression}) is violated by the row {violating[0].asDict()}; "
                "nothing was written.",
                constraint=name,
            )
    files = write_files(
        df,
        table_path=txn.log.table_path,
        partition_columns=txn.partition_columns,
        schema=txn.schema,
        column_mapping=txn.configuration.column_mapping_mode,
    )
    if checks:
        txn.record_constraints_checked(files)
    return files


def record(
    txn: OptimisticTransaction, name: OperationName, metrics: M, parameters: Mapping[str, Any]
) -> M:
    """Adds a statement's operation and metrics to the transaction's commitInfo; returns them."""
    txn.record_operation(Operation(name, parameters), metrics.to_operation_metrics())
    return metrics


def predicate_parameters(predicate: Expression | None) -> dict[str, Any]:
    """The ``predicate`` operation parameter: the condition's SQL, or ``[]`` for every row."""
    return {"predicate": [to_sql(predicate)] if predicate is not None else []}


def condition_to_predicate(
    condition: str | Column | None, *, schema: StructType, aliases: Sequence[str] = ()
) -> Expression | None:
    """Parses a user condition into the predicate IR (None stays None)."""
    if condition is None:
        return None
    return parse_condition(condition, schema=schema, aliases=aliases)


def condition_column(condition: str | Column) -> Column:
    """A user condition as a Spark Column."""
    return condition if isinstance(condition, Column) else F.expr(condition)


def read_files(
    spark: SparkSession, txn: OptimisticTransaction, files: Sequence[AddFile]
) -> DataFrame:
    """The live rows of ``files`` under the transaction's schema (deletion vectors applied)."""
    from deltatx.spark.dv_filter import live_rows_filter
    from deltatx.spark.partitioned_scan import partition_discovery_frame

    row_filter = live_rows_filter(txn.log, files)
    # Partition discovery names columns after directories: physical names under column mapping.
    if row_filter is None and not txn.configuration.column_mapping:
        native = partition_discovery_frame(
            spark,
            table_path=txn.log.table_path,
            files=files,
            schema=txn.schema,
            partition_columns=txn.partition_columns,
        )
        if native is not None:
            return native
    return files_to_dataframe(
        spark,
        table_path=txn.log.table_path,
        files=files,
        schema=txn.schema,
        partition_columns=txn.partition_columns,
        row_filter=row_filter,
        column_mapping=txn.configuration.column_mapping_mode,
        vectors_in_reader=True,
    )


def file_metrics(files: Sequence[AddFile]) -> tuple[int, int]:
    """Total live rows (from stats, less deletion vectors; unknown counts as 0) and bytes."""
    rows = 0
    for f in files:
        rows += num_records(f.stats) or 0
        if f.deletion_vector is not None:
            rows -= f.deletion_vector.cardinality
    return rows, sum(f.size for f in files)


def covers_whole_files(predicate: Expression, partition_columns: Sequence[str]) -> bool:
    """Whether a predicate is decided by partition values alone, so it covers whole files."""
    parts = {c.lower() for c in partition_columns}
    return bool(parts) and columns_of(predicate) <= parts and not has_opaque(predicate)


def empty_table_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame with the table schema, for analysing expressions up front."""
    return spark.createDataFrame([], to_spark_schema(schema))


def validate_condition(
    spark: SparkSession,
    txn: OptimisticTransaction,
    condition: str | Column,
    *,
    frame: DataFrame | None = None,
) -> None:
    """Analyses a condition against the table schema before any file is written.

    ``frame`` is an :func:`empty_table_frame` of the table to reuse, if the caller has one.

    Raises:
        InvalidConditionError: Spark cannot resolve it, or it is not a boolean.
    """
    from pyspark.sql.types import BooleanType

    try:
        empty = frame if frame is not None else empty_table_frame(spark, txn.schema)
        field = empty.select(condition_column(condition)).schema[0]
    except Exception as exc:
        raise InvalidConditionError(
            f"condition {condition!r} is not valid on table {txn.log.table_path}: "
            f"{_first_line(exc)}"
        ) from None
    if not isinstance(field.dataType, BooleanType):
        raise InvalidConditionError(
            f"condition {condition!r} is a {field.dataType.simpleString()}, not a boolean"
        )


def check_assignment_targets(
    txn: OptimisticTransaction, assignments: Mapping[str, str | Column]
) -> None:
    """Checks that ``assignments`` sets at least one column, each existing and not generated.

    Raises:
        InvalidArgumentError: There is no assignment, or a column is missing or generated.
    """
    if not assignments:
        raise InvalidArgumentError("set needs at least one column assignment")
    for name in assignments:
        field = txn.schema.get(name)
        if field is None:
            raise InvalidArgumentError(
                f"cannot set column '{name}': the table has no such column "
                f"(columns: {', '.join(txn.schema.field_names())})"
            )
        if any(g.column == field.name for g in txn.configuration.generated_columns):
            raise InvalidArgumentError(
                f"cannot set column '{field.name}': it is a generated column, computed from "
                "the row's other columns on every write"
            )


def validate_assignments(
    spark: SparkSession,
    txn: OptimisticTransaction,
    assignments: Mapping[str, str | Column],
    *,
    frame: DataFrame | None = None,
) -> dict[str, Column]:
    """Resolves ``{column: expression}`` against the table, cast to each column's type.

    ``frame`` is an :func:`empty_table_frame` of the table to reuse, if the caller has one.

    Raises:
        InvalidArgumentError: A column does not exist.
        InvalidConditionError: An expression does not resolve against the table.
    """
    check_assignment_targets(txn, assignments)
    spark_schema = to_spark_schema(txn.schema)
    out: dict[str, Column] = {}
    if frame is None:
        frame = empty_table_frame(spark, txn.schema)
    for name, value in assignments.items():
        field = txn.schema.get(name)
        assert field is not None
        expr = value if isinstance(value, Column) else F.expr(value)
        typed = expr.cast(spark_schema[field.name].dataType)
        try:
            _ = frame.select(typed).schema
        except Exception as exc:
            raise InvalidConditionError(
                f"expression for '{name}' ({value!r}) is not valid: {_first_line(exc)}"
            ) from None
        out[field.name] = typed
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
