"""Creating and replacing a table definition, by path or by name: the one place for both.

CREATE TABLE in SQL and delta-spark's ``DeltaTable.create(...)`` builders come here. A name
resolves as in :mod:`deltatx.catalog`; a new named table without a location is managed and
lives under the warehouse directory; with a location it is external.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from pyspark.sql import DataFrame, SparkSession

from deltatx.catalog import Catalog, identifier, spark_catalog_location
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


__all__ = ["CreateMode", "TableSpec", "define_table"]
