"""Creating and replacing a table definition, by path or by name: the one place for both.

CREATE TABLE in SQL and delta-spark's ``DeltaTable.create(...)`` builders come here. A name
resolves as in :mod:`deltatx.catalog`; a new named table without a location is managed and
lives under the warehouse directory; with a location it is external.
``df.write.format("delta").saveAsTable(name)`` comes here too (:func:`save_as_table`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from deltatx.catalog import Catalog, TableIdentifier, identifier, spark_catalog_location
from deltatx.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from deltatx.kernel.features import protocol_with_features, reader_features, writer_features
from deltatx.kernel.file_paths import table_root
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.schema import StructType
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import file_metrics, new_table_actions, to_delta_schema
from deltatx.spark.write import write_files


class CreateMode(StrEnum):
    """What to do when the table already exists (or does not)."""

    CREATE = "create"
    IF_NOT_EXISTS = "if_not_exists"
    REPLACE = "replace"
    CREATE_OR_REPLACE = "create_or_replace"


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table to create: where (``path``, or ``name`` and maybe ``location``) and what.

    ``schema`` may be None with data (the data's schema is used) or when an existing Delta
    table at ``location`` is being named.
    """

    name: str | None = None
    path: str | None = None
    location: str | None = None
    schema: StructType | None = None
    partition_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None


def define_table(
    spark: SparkSession, spec: TableSpec, *, mode: CreateMode, data: DataFrame | None = None
) -> str:
    """Creates (or replaces) the table; returns its root.

    Raises:
        TableAlreadyExistsError: The table exists and ``mode`` is CREATE.
        TableNotFoundError: ``mode`` is REPLACE and there is no table.
        InvalidArgumentError: Contradictory locations, or no schema for a new table.
    """
    if (spec.name is None) == (spec.path is None):
        raise InvalidArgumentError("a table is created by name or by path (one of the two)")
    replacing = mode in (CreateMode.REPLACE, CreateMode.CREATE_OR_REPLACE)
    catalog: Catalog | None = None
    registered = False
    managed = False
    if spec.path is not None:
        path = spec.path
        if spec.location is not None and table_root(spec.location) != table_root(path):
            raise InvalidArgumentError("a table created by path cannot have another location")
    else:
        assert spec.name is not None
        ident = identifier(spark, spec.name)
        known, spark_location = spark_catalog_location(spark, spec.name)
        if known and spark_location is None:
            if mode is CreateMode.IF_NOT_EXISTS:
                return ""
            raise TableAlreadyExistsError(f"table {ident} already exists in Spark's catalog")
        catalog = Catalog.for_session(spark)
        entry = catalog.lookup(ident)
        existing = spark_location if known else (entry.location if entry else None)
        registered = existing is not None
        moved = existing is not None and spec.location is not None
        if moved and table_root(str(spec.location)) != table_root(str(existing)):
            raise InvalidArgumentError(
                f"table {ident} already exists at {existing}, not at {spec.location}"
            )
        path = existing or spec.location or catalog.managed_location(ident)
        managed = existing is None and spec.location is None
        if registered and not replacing:
            if mode is CreateMode.IF_NOT_EXISTS:
                return path
            raise TableAlreadyExistsError(f"table {ident} already exists")
    log = DeltaLog.for_table(path)
    exists = log.table_exists()
    if mode is CreateMode.REPLACE and not exists:
        raise TableNotFoundError(f"cannot replace {spec.name or path}: there is no such table")
    if exists and not replacing:
        if mode is CreateMode.IF_NOT_EXISTS and (registered or catalog is None):
            return log.table_path
        names_existing = spec.schema is None and data is None
        if catalog is not None and not registered and not managed and names_existing:
            # CREATE TABLE name LOCATION '<an existing Delta table>' names that table.
            catalog.register(identifier(spark, str(spec.name)), log.table_path, managed=False)
            return log.table_path
        raise TableAlreadyExistsError(f"a Delta table already exists at {log.table_path}")
    _commit_definition(log, spec, data, exists=exists, managed=managed)
    if catalog is not None and not registered:
        catalog.register(identifier(spark, str(spec.name)), log.table_path, managed=managed)
    return log.table_path


def _commit_definition(
    log: DeltaLog, spec: TableSpec, data: DataFrame | None, *, exists: bool, managed: bool
) -> None:
    if data is not None:
        if spec.schema is not None:
            raise InvalidArgumentError("give the columns or the data, not both")
        schema = to_delta_schema(data.schema)
    elif spec.schema is not None:
        schema = spec.schema
    elif exists:
        schema = log.snapshot().schema
    else:
        raise InvalidArgumentError(f"a new table ({spec.name or spec.path}) needs columns")
    metadata, protocol = new_table_actions(
        schema,
        partition_by=list(spec.partition_by),
        properties=dict(spec.properties),
        description=spec.comment,
    )
    txn = OptimisticTransaction(log, log.snapshot() if exists else None)
    if exists:
        old = txn.metadata
        # A replaced table keeps its identity; its protocol never gets weaker.
        metadata = replace(metadata, id=old.id, created_time=old.created_time)
        wanted = reader_features(protocol) | writer_features(protocol)
        protocol = protocol_with_features(txn.protocol, wanted)
        txn.remove_files(txn.scan(None))
        name = (
            OperationName.CREATE_OR_REPLACE_TABLE_AS_SELECT
            if data is not None
            else OperationName.CREATE_OR_REPLACE_TABLE
        )
    else:
        name = (
            OperationName.CREATE_TABLE_AS_SELECT if data is not None else OperationName.CREATE_TABLE
        )
    txn.update_protocol(protocol)
    txn.update_metadata(metadata, replacing=exists)
    metrics: dict[str, int] = {}
    if data is not None:
        added = write_files(
            data,
            table_path=log.table_path,
            partition_columns=metadata.partition_columns,
            schema=txn.schema,
            column_mapping=txn.configuration.column_mapping_mode,
        )
        txn.add_files(added)
        rows, size = file_metrics(added)
        metrics = {"numFiles": len(added), "numOutputRows": rows, "numOutputBytes": size}
    txn.record_operation(
        Operation(
            name,
            {
                "isManaged": managed,
                "description": spec.comment,
                "partitionBy": list(metadata.partition_columns),
                "properties": dict(metadata.configuration),
            },
        ),
        metrics,
    )
    txn.commit()


_REFUSING_MODES = frozenset({"error", "errorifexists", "default"})


def save_as_table(
    df: DataFrame,
    name: str,
    *,
    source: str,
    mode: str,
    partition_by: Sequence[str] | None,
    options: Mapping[str, Any],
) -> None:
    """``df.write.format(source).saveAsTable(name)``: a write by path, to the path of a name.

    An existing table (by Spark's catalog, then deltatx's) takes the write with Spark's save
    ``mode``. A new name becomes a managed table under the warehouse directory, or an external
    one at the ``path`` option, and is recorded in deltatx's catalog once its first commit
    has landed, so a failed write leaves no name behind.

    Raises:
        TableAlreadyExistsError: The name exists and ``mode`` is ``error``, or names a table
            of Spark's that is not a Delta table, or a new managed table's directory already
            holds a Delta table.
        InvalidArgumentError: The ``path`` option contradicts the named table's location.
    """
    spark = df.sparkSession
    ident = identifier(spark, name)
    rest = {k: v for k, v in options.items() if k.lower() != "path"}
    location = next((str(v) for k, v in options.items() if k.lower() == "path"), None)
    known, spark_location = spark_catalog_location(spark, name)
    if known and spark_location is None:
        raise TableAlreadyExistsError(
            f"table {ident} already exists in Spark's catalog and is not a Delta table"
        )
    catalog = Catalog.for_session(spark)
    entry = None if known else catalog.lookup(ident)
    existing = spark_location if known else (entry.location if entry else None)
    writer = df.write.format(source)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    for key, value in rest.items():
        writer = writer.option(key, value)
    if existing is not None:
        if location is not None and table_root(location) != table_root(existing):
            raise InvalidArgumentError(
                f"table {ident} already exists at {existing}, not at {location}"
            )
        if mode in _REFUSING_MODES:
            raise TableAlreadyExistsError(f"table {ident} already exists")
        if mode != "ignore":
            writer.mode(mode).save(existing)
        return
    target = table_root(location) if location is not None else catalog.managed_location(ident)
    if location is None and DeltaLog.for_table(target).table_exists():
        raise TableAlreadyExistsError(
            f"cannot create table {ident}: its managed location {target} already holds a "
            "Delta table that no name refers to"
        )
    writer.mode(mode).save(target)
    _register(catalog, ident, target, managed=location is None)


def _register(catalog: Catalog, ident: TableIdentifier, location: str, *, managed: bool) -> None:
    try:
        catalog.register(ident, location, managed=managed)
    except TableAlreadyExistsError:
        # Another session named the same new table at the same moment; both writes went to
        # one table, which is then the name's either way.
        entry = catalog.lookup(ident)
        if entry is None or table_root(entry.location) != table_root(location):
            raise


__all__ = ["CreateMode", "TableSpec", "define_table", "save_as_table"]
