"""Runs parsed statements: Delta statements through the facade, everything else through Spark."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType as SparkStructType
from sqlglot import exp

from deltatx.catalog import Catalog, identifier, resolve_name, spark_catalog_location
from deltatx.delta_sql.statements import (
    AddColumns,
    AddConstraint,
    CreateTable,
    Delete,
    DescribeDetail,
    DescribeHistory,
    DropColumns,
    DropConstraint,
    DropFeature,
    DropTable,
    Insert,
    Merge,
    MergeAction,
    Optimize,
    Passthrough,
    Query,
    RenameColumn,
    ReorgPurge,
    Restore,
    SetProperties,
    Statement,
    TableRef,
    UnsetProperties,
    Unsupported,
    Update,
    Vacuum,
)
from deltatx.delta_sql.translation import DELTA_PROVIDERS, table_from_node
from deltatx.errors import (
    InvalidArgumentError,
    SqlError,
    TableNotFoundError,
    UnsupportedStatementError,
)
from deltatx.kernel.file_paths import table_root
from deltatx.kernel.operations import OperationName
from deltatx.kernel.table_configuration import with_generation_expressions
from deltatx.log.transaction import OptimisticTransaction
from deltatx.reexecution import Backoff
from deltatx.spark.commands.common import (
    condition_to_predicate,
    parse_schema_argument,
    to_spark_schema,
)
from deltatx.spark.commands.optimize import stage_compaction
from deltatx.table_creation import CreateMode, TableSpec, define_table
from deltatx.table_features import drop_feature
from deltatx.tables import DeltaTable

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def delta_path(spark: SparkSession, ref: TableRef) -> str | None:
    """The root of the Delta table ``ref`` names, or None when it names no Delta table."""
    if ref.path is not None:
        return ref.path
    assert ref.name is not None
    return resolve_name(spark, ref.name)


def _table(spark: SparkSession, ref: TableRef, statement: str) -> DeltaTable:
    path = delta_path(spark, ref)
    if path is None:
        raise TableNotFoundError(f"{statement}: there is no Delta table named {ref}")
    try:
        return DeltaTable.for_path(spark, path)
    except TableNotFoundError:
        raise TableNotFoundError(f"{statement}: there is no Delta table at {ref}") from None


def _empty(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], SparkStructType([]))


def _one_row(spark: SparkSession, values: Mapping[str, int], kind: str = "BIGINT") -> DataFrame:
    schema = ", ".join(f"{k} {kind}" for k in values)
    return spark.createDataFrame([tuple(values.values())], schema)


def _last_metrics(table: DeltaTable) -> dict[str, Any]:
    entries = table.log.history(1)
    ci = entries[0].commit_info if entries else None
    return dict(ci.operation_metrics or {}) if ci is not None else {}


def execute(
    spark: SparkSession,
    statement: Statement,
    text: str,
    *,
    retries: int = 0,
    backoff: Backoff | None = None,
) -> DataFrame:
    """Runs one parsed statement (whose source is ``text``); returns its result (empty for DDL).

    ``retries``/``backoff`` re-execute a conflicting UPDATE, DELETE or MERGE on a Delta table
    (see :mod:`deltatx.reexecution`); any other statement refuses them.

    Raises:
        InvalidArgumentError: ``retries`` or ``backoff`` was given for a statement that is not
            an UPDATE, DELETE or MERGE on a Delta table.
    """
    dml = isinstance(statement, Update | Delete | Merge)
    if (retries or backoff is not None) and not dml:
        raise InvalidArgumentError(
            "retries and backoff apply to UPDATE, DELETE and MERGE on a Delta table only; "
            f"this statement is a {type(statement).__name__.upper()}"
        )
    if isinstance(statement, Passthrough):
        return spark.sql(text)
    if isinstance(statement, Query):
        return query_frame(spark, statement.tree, original=text)
    if isinstance(statement, Unsupported):
        table = statement.table
        if table is None or delta_path(spark, table) is not None:
            raise UnsupportedStatementError(
                f"deltatx does not run {statement.construct} on a Delta table",
                construct=statement.construct,
                line=statement.position.line,
                column=statement.position.column,
            )
        return spark.sql(text)
    if isinstance(statement, CreateTable):
        return _create(spark, statement, text)
    if isinstance(statement, DropTable):
        return _drop(spark, statement, text)
    if isinstance(statement, Insert | Update | Delete | Merge):
        target = statement.target if isinstance(statement, Merge) else statement.table
        if target.path is None and delta_path(spark, target) is None:
            if retries or backoff is not None:
                raise InvalidArgumentError(
                    f"retries and backoff apply to Delta tables only; {target} is not one"
                )
            return spark.sql(text)
        if isinstance(statement, Insert):
            return _insert(spark, statement)
        if isinstance(statement, Update):
            dt = _table(spark, statement.table, "UPDATE")
            m = dt.update(
                statement.condition,
                dict(statement.assignments),
                retries=retries,
                backoff=backoff,
            )
            return _one_row(spark, {"num_affected_rows": m.num_updated_rows})
        if isinstance(statement, Delete):
            dt = _table(spark, statement.table, "DELETE")
            d = dt.delete(statement.condition, retries=retries, backoff=backoff)
            return _one_row(spark, {"num_affected_rows": d.num_deleted_rows})
        return _merge(spark, statement, retries=retries, backoff=backoff)
    return _delta_command(spark, statement)


def _delta_command(spark: SparkSession, statement: Statement) -> DataFrame:
    if isinstance(statement, Optimize):
        dt = _table(spark, statement.table, "OPTIMIZE")
        builder = dt.optimize()
        if statement.where is not None:
            builder = builder.where(statement.where)
        m = (
            builder.execute_z_order_by(*statement.z_order_by)
            if statement.z_order_by
            else builder.execute_compaction()
        )
        return _optimize_result(spark, dt.path, m)
    if isinstance(statement, ReorgPurge):
        dt = _table(spark, statement.table, "REORG TABLE")
        if statement.where is None:
            m = dt.reorg_purge()
        else:
            where = statement.where

            def purge(s: SparkSession, txn: OptimisticTransaction) -> Any:
                predicate = condition_to_predicate(where, schema=txn.schema)
                files = [f for f in txn.scan(predicate) if f.deletion_vector is not None]
                return stage_compaction(s, txn, files=files, operation=OperationName.REORG)

            m = dt.run(purge)
        return _optimize_result(spark, dt.path, m)
    if isinstance(statement, Vacuum):
        dt = _table(spark, statement.table, "VACUUM")
        enforce = str(spark.conf.get(_RETENTION_CHECK, "true")).lower() != "false"
        v = dt.vacuum(statement.retain_hours, statement.dry_run, enforce_retention=enforce)
        paths = list(v.deleted_paths) if statement.dry_run else [dt.path]
        return spark.createDataFrame([(p,) for p in paths], "path STRING")
    if isinstance(statement, Restore):
        dt = _table(spark, statement.table, "RESTORE")
        r = (
            dt.restore_to_version(statement.version)
            if statement.version is not None
            else dt.restore_to_timestamp(str(statement.timestamp))
        )
        return _one_row(
            spark,
            {
                "table_size_after_restore": r.table_size_after_restore,
                "num_of_files_after_restore": r.num_of_files_after_restore,
                "num_removed_files": r.num_removed_files,
                "num_restored_files": r.num_restored_files,
                "removed_files_size": r.removed_files_size,
                "restored_files_size": r.restored_files_size,
            },
        )
    if isinstance(statement, DescribeHistory):
        return _table(spark, statement.table, "DESCRIBE HISTORY").history(statement.limit)
    if isinstance(statement, DescribeDetail):
        return _table(spark, statement.table, "DESCRIBE DETAIL").detail()
    if isinstance(statement, SetProperties):
        _table(spark, statement.table, "ALTER TABLE").set_properties(dict(statement.properties))
        return _empty(spark)
    if isinstance(statement, UnsetProperties):
        dt = _table(spark, statement.table, "ALTER TABLE")
        dt.unset_properties(statement.keys, if_exists=statement.if_exists)
        return _empty(spark)
    if isinstance(statement, AddColumns):
        _table(spark, statement.table, "ALTER TABLE").add_columns(statement.columns)
        return _empty(spark)
    if isinstance(statement, RenameColumn):
        dt = _table(spark, statement.table, "ALTER TABLE ... RENAME COLUMN")
        dt.rename_column(statement.old, statement.new)
        return _empty(spark)
    if isinstance(statement, DropColumns):
        dt = _table(spark, statement.table, "ALTER TABLE ... DROP COLUMNS")
        names = statement.columns
        if statement.if_exists:
            names = tuple(n for n in names if dt.log.snapshot().schema.get(n) is not None)
            if not names:
                return _empty(spark)
        dt.drop_columns(*names)
        return _empty(spark)
    if isinstance(statement, AddConstraint):
        dt = _table(spark, statement.table, "ALTER TABLE ... ADD CONSTRAINT")
        dt.add_constraint(statement.name, statement.expression)
        return _empty(spark)
    if isinstance(statement, DropConstraint):
        dt = _table(spark, statement.table, "ALTER TABLE ... DROP CONSTRAINT")
        dt.drop_constraint(statement.name, if_exists=statement.if_exists)
        return _empty(spark)
    if isinstance(statement, DropFeature):
        dt = _table(spark, statement.table, "ALTER TABLE ... DROP FEATURE")
        drop_feature(spark, dt.log, statement.feature)
        return _empty(spark)
    raise AssertionError(f"unhandled statement {statement!r}")


_OPTIMIZE_FIELDS = (
    ("numFilesAdded", "num_added_files"),
    ("numFilesRemoved", "num_removed_files"),
    ("numBatches", "num_batches"),
    ("totalConsideredFiles", "total_considered_files"),
    ("totalFilesSkipped", "total_files_skipped"),
    ("numRemovedBytes", "num_removed_bytes"),
    ("numAddedBytes", "num_added_bytes"),
)


def _optimize_result(spark: SparkSession, path: str, metrics: Any) -> DataFrame:
    fields = ", ".join(f"{name}: BIGINT" for name, _ in _OPTIMIZE_FIELDS)
    values = tuple(int(getattr(metrics, attr)) for _, attr in _OPTIMIZE_FIELDS)
    return spark.createDataFrame([(path, values)], f"path STRING, metrics STRUCT<{fields}>")


# --- queries --------------------------------------------------------------------------------


def _view_name(path: str, version: int) -> str:
    digest = hashlib.sha1(table_root(path).encode()).hexdigest()[:16]
    return f"__deltatx_{digest}_v{version}"


def query_frame(
    spark: SparkSession, tree: exp.Expression, *, original: str | None = None
) -> DataFrame:
    """Runs a query whose Delta table references become temporary views over ``to_df``.

    A query that references no Delta table goes to Spark as written (``original``).
    """
    tree = tree.copy()
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    rewritten = False
    for node in list(tree.find_all(exp.Table)):
        changes = _table_changes(spark, node)
        if changes is not None:
            view, frame = changes
            frame.createOrReplaceTempView(view)
            replacement = exp.to_table(view)
            if node.alias:
                replacement.set("alias", exp.TableAlias(this=exp.to_identifier(node.alias)))
            node.replace(replacement)
            rewritten = True
            continue
        ref = table_from_node(node)
        if ref is None:
            continue
        if ref.name is not None and ref.name.lower() in ctes:
            continue
        path = delta_path(spark, ref)
        if path is None:
            continue
        dt = DeltaTable.for_path(spark, path)
        snap = dt.snapshot(ref.version, timestamp=ref.timestamp)
        view = _view_name(dt.path, snap.version)
        dt.to_df(version=snap.version).createOrReplaceTempView(view)
        replacement = exp.to_table(view)
        alias = ref.alias or ref.short_name
        if alias is not None:
            replacement.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        node.replace(replacement)
        rewritten = True
    if not rewritten and original is not None:
        return spark.sql(original)
    return spark.sql(tree.sql(dialect="spark"))


_CHANGE_FUNCTIONS = {"table_changes": False, "table_changes_by_path": True}


def _table_changes(spark: SparkSession, node: exp.Expression) -> tuple[str, DataFrame] | None:
    """``table_changes('t', start[, end])`` or ``table_changes_by_path('/p', ...)``: a view.

    A bound that is a number is a version; a string is a timestamp.

    Raises:
        SqlError: The function is called with arguments it does not take.
        TableNotFoundError: It names no Delta table.
    """
    function = node.this if isinstance(node, exp.Table) else None
    if not isinstance(function, exp.Anonymous):
        return None
    name = str(function.this).lower()
    if name not in _CHANGE_FUNCTIONS:
        return None
    args = list(function.expressions)
    literals = [a for a in args if isinstance(a, exp.Literal)]
    if not 2 <= len(args) <= 3 or len(literals) != len(args) or not literals[0].is_string:
        raise SqlError(
            f"{name} takes a table {'path' if _CHANGE_FUNCTIONS[name] else 'name'} as a string, "
            f"a starting version or timestamp and an optional ending one: "
            f"{name}('{'/path' if _CHANGE_FUNCTIONS[name] else 'db.table'}', 2[, 5]) or "
            f"{name}(..., '2024-01-01 00:00:00'[, ...])"
        )
    target = str(literals[0].this)
    ref = TableRef(path=target) if _CHANGE_FUNCTIONS[name] else TableRef(name=target)
    table = _table(spark, ref, name)
    bounds: list[dict[str, Any]] = []
    for literal in literals[1:]:
        if literal.is_string:
            bounds.append({"timestamp": str(literal.this)})
        elif str(literal.this).isdigit():
            bounds.append({"version": int(str(literal.this))})
        else:
            raise SqlError(f"{name}: a version must be a whole number, got {literal.this}")
    start = bounds[0]
    end = bounds[1] if len(bounds) > 1 else {}
    frame = table.changes(
        start.get("version"),
        end.get("version"),
        starting_timestamp=start.get("timestamp"),
        ending_timestamp=end.get("timestamp"),
    )
    digest = hashlib.sha1(f"{table.path}|{bounds}".encode()).hexdigest()[:16]
    return f"__deltatx_changes_{digest}", frame


# --- DML ------------------------------------------------------------------------------------


def _insert(spark: SparkSession, stmt: Insert) -> DataFrame:
    dt = _table(spark, stmt.table, "INSERT")
    data = query_frame(spark, stmt.query)
    snapshot = dt.snapshot()
    schema = to_spark_schema(snapshot.schema)
    by_name = {f.name.lower(): f for f in schema.fields}
    # Generated columns the statement does not name are computed by the write.
    generated = {g.column for g in snapshot.table_configuration.generated_columns}
    targets = list(stmt.columns) if stmt.columns is not None else [f.name for f in schema.fields]
    plain = [f.name for f in schema.fields if f.name not in generated]
    if stmt.columns is None and generated and len(data.columns) == len(plain):
        targets = plain
    if len(data.columns) != len(targets):
        raise SqlError(
            f"INSERT into {stmt.table}: the query gives {len(data.columns)} columns but "
            f"{len(targets)} are expected ({', '.join(targets)})"
        )
    given: dict[str, Any] = {}
    for source, target in zip(data.columns, targets, strict=True):
        field = by_name.get(target.lower())
        if field is None:
            raise SqlError(f"INSERT into {stmt.table}: the table has no column '{target}'")
        given[field.name] = F.col(f"`{source}`").cast(field.dataType).alias(field.name)
    columns = [
        given.get(f.name, F.lit(None).cast(f.dataType).alias(f.name))
        for f in schema.fields
        if f.name in given or f.name not in generated
    ]
    frame = data.select(*columns)
    overwrite = stmt.overwrite or stmt.replace_where is not None
    from deltatx.tables import write

    write(
        frame,
        dt.path,
        mode="overwrite" if overwrite else "append",
        replace_where=stmt.replace_where,
    )
    rows = int(_last_metrics(dt).get("numOutputRows", 0))
    return _one_row(spark, {"num_affected_rows": rows, "num_inserted_rows": rows})


def _merge(
    spark: SparkSession, stmt: Merge, *, retries: int = 0, backoff: Backoff | None = None
) -> DataFrame:
    dt = _table(spark, stmt.target, "MERGE")
    if stmt.source_table is not None:
        ref = stmt.source_table
        path = delta_path(spark, ref)
        if path is not None:
            source = DeltaTable.for_path(spark, path).to_df(
                version=ref.version, timestamp=ref.timestamp
            )
        else:
            source = spark.table(str(ref.name))
    else:
        assert stmt.source_query is not None
        source = query_frame(spark, stmt.source_query)
    source = source.alias(stmt.source_alias or "source")
    builder = dt.alias(stmt.target.short_name or "target").merge(source, stmt.condition)
    for clause in stmt.clauses:
        sets = None if clause.assignments is None else dict(clause.assignments)
        cond = clause.condition
        if clause.action is MergeAction.MATCHED_UPDATE:
            builder = (
                builder.when_matched_update_all(cond)
                if sets is None
                else builder.when_matched_update(sets, cond)
            )
        elif clause.action is MergeAction.MATCHED_DELETE:
            builder = builder.when_matched_delete(cond)
        elif clause.action is MergeAction.NOT_MATCHED_INSERT:
            builder = (
                builder.when_not_matched_insert_all(cond)
                if sets is None
                else builder.when_not_matched_insert(sets, cond)
            )
        elif clause.action is MergeAction.NOT_MATCHED_BY_SOURCE_UPDATE:
            builder = builder.when_not_matched_by_source_update(sets or {}, cond)
        else:
            builder = builder.when_not_matched_by_source_delete(cond)
    m = builder.execute(retries=retries, backoff=backoff)
    return _one_row(
        spark,
        {
            "num_affected_rows": m.num_target_rows_updated
            + m.num_target_rows_deleted
            + m.num_target_rows_inserted,
            "num_updated_rows": m.num_target_rows_updated,
            "num_deleted_rows": m.num_target_rows_deleted,
            "num_inserted_rows": m.num_target_rows_inserted,
        },
    )


# --- DDL ------------------------------------------------------------------------------------


def _create(spark: SparkSession, stmt: CreateTable, text: str) -> DataFrame:
    if stmt.provider is None:
        default = str(spark.conf.get("spark.sql.sources.default", "parquet")).lower()
        if default not in DELTA_PROVIDERS:
            return spark.sql(text)
    if stmt.columns is not None and stmt.query is not None:
        raise SqlError("CREATE TABLE takes a column list or AS SELECT, not both")
    if stmt.comment is not None and stmt.query is not None:
        raise UnsupportedStatementError(
            "CREATE TABLE ... COMMENT ... AS SELECT is not supported; set the comment with "
            "CREATE TABLE (columns) COMMENT ... and then INSERT",
            construct="CREATE TABLE ... COMMENT ... AS SELECT",
        )
    if stmt.or_replace:
        mode = CreateMode.CREATE_OR_REPLACE
    elif stmt.if_not_exists:
        mode = CreateMode.IF_NOT_EXISTS
    else:
        mode = CreateMode.CREATE
    spec = TableSpec(
        name=stmt.table.name,
        path=stmt.table.path,
        location=stmt.location,
        schema=(
            with_generation_expressions(parse_schema_argument(stmt.columns), stmt.generated_columns)
            if stmt.columns is not None
            else None
        ),
        partition_by=stmt.partition_by,
        properties=stmt.properties,
        comment=stmt.comment,
    )
    data = query_frame(spark, stmt.query) if stmt.query is not None else None
    try:
        define_table(spark, spec, mode=mode, data=data)
    except InvalidArgumentError as exc:
        if type(exc) is InvalidArgumentError:
            raise SqlError(f"CREATE TABLE {stmt.table}: {exc}") from None
        raise
    return _empty(spark)


def _drop(spark: SparkSession, stmt: DropTable, text: str) -> DataFrame:
    if stmt.table.name is None:
        raise UnsupportedStatementError(
            "DROP TABLE delta.`path` is not supported: a table named by its path is not in "
            "any catalog; delete the directory instead",
            construct="DROP TABLE delta.`path`",
        )
    known, _ = spark_catalog_location(spark, stmt.table.name)
    if known:
        return spark.sql(text)
    entry = Catalog.for_session(spark).drop(identifier(spark, stmt.table.name))
    if entry is None and not stmt.if_exists:
        raise TableNotFoundError(f"DROP TABLE: there is no table named {stmt.table}")
    return _empty(spark)


__all__ = ["delta_path", "execute", "query_frame"]
