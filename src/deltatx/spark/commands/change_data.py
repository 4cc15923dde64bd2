"""Change data files: what UPDATE, DELETE and MERGE record when the table keeps a change feed.

With ``delta.enableChangeDataFeed = true`` a statement that rewrites or marks rows writes the
rows it changed, each tagged with ``_change_type``, as Parquet files under ``_change_data/``
(partitioned like the table) and stages them as ``cdc`` actions (``dataChange = false``) in the
same commit. A commit that only adds new files or only drops whole files needs none: readers
derive its changes from the ``add`` and ``remove`` actions.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddCDCFile, AddFile
from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.log.change_feed import CHANGE_DATA_DIR, CHANGE_TYPE_COLUMN, ChangeType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.schema import quote_column
from deltatx.spark.write import write_files


def records_changes(txn: OptimisticTransaction) -> bool:
    """Whether the table records its change data feed (so DML must write change files)."""
    return txn.configuration.change_data_feed


def tagged(rows: DataFrame, change: ChangeType) -> DataFrame:
    """``rows`` (the table's columns) with ``_change_type`` set to ``change``."""
    return rows.withColumn(CHANGE_TYPE_COLUMN, F.lit(change.value))


def table_columns(txn: OptimisticTransaction, qualifier: str | None = None) -> list[Column]:
    """The table's columns, in order, optionally qualified by a DataFrame alias."""
    prefix = "" if qualifier is None else f"`{qualifier}`."
    return [F.col(f"{prefix}{quote_column(f.name)}").alias(f.name) for f in txn.schema.fields]


def stage_change_data(
    txn: OptimisticTransaction,
    changes: DataFrame,
    *,
    covering: Iterable[AddFile],
) -> list[AddCDCFile]:
    """Writes ``changes`` as change data files and stages their ``cdc`` actions.

    Does nothing when the table does not record its change feed.

    Args:
        txn: The transaction the statement stages into.
        changes: The changed rows: the table's columns and ``_change_type``.
        covering: The data files the statement added or removed (their changes are the ones
            recorded here).

    Returns:
        The staged actions (none for an empty ``changes``).
    """
    if not records_changes(txn):
        return []
    schema = StructType(
        (*txn.schema.fields, StructField(CHANGE_TYPE_COLUMN, PrimitiveType("string"), True))
    )
    root = txn.log.table_path.rstrip("/")
    written = write_files(
        changes,
        table_path=f"{root}/{CHANGE_DATA_DIR}",
        partition_columns=txn.partition_columns,
        schema=schema,
        data_change=False,
    )
    cdc = [
        AddCDCFile(
            path=f"{CHANGE_DATA_DIR}/{f.path}",
            partition_values=f.partition_values,
            size=f.size,
            data_change=False,
        )
        for f in written
    ]
    txn.add_cdc_files(cdc, covering=[f.path for f in covering])
    return cdc


def update_changes(matched: DataFrame, updated: list[Column]) -> DataFrame:
    """The pre- and post-images of updated rows.

    Args:
        matched: The rows the UPDATE matched, with the table's columns as they were.
        updated: The table's columns as the UPDATE sets them, evaluated on ``matched``.
    """
    pre = tagged(matched, ChangeType.UPDATE_PREIMAGE)
    post = tagged(matched.select(*updated), ChangeType.UPDATE_POSTIMAGE)
    return pre.unionByName(post)


def merge_changes(
    joined: DataFrame,
    *,
    clause: Column,
    in_target: Column,
    before: list[Column],
    after: list[Column],
    inserts: Iterable[int],
    updates: Iterable[int],
    deletes: Iterable[int],
) -> DataFrame:
    """The change rows of a MERGE, from its joined and classified rows.

    Args:
        joined: One row per target/source pairing, each with the index of its clause.
        clause: The clause index column of ``joined``.
        in_target: True where the row pairs a target row.
        before: The table's columns as the target row was.
        after: The table's columns as the MERGE writes them.
        inserts: Indexes of the insert clauses.
        updates: Indexes of the update clauses.
        deletes: Indexes of the delete clauses.
    """

    def among(indexes: Iterable[int]) -> Column:
        return clause.isin(sorted(indexes) or [-99])

    def rows(condition: Column, columns: list[Column], change: ChangeType) -> DataFrame:
        return joined.filter(condition).select(
            *columns, F.lit(change.value).alias(CHANGE_TYPE_COLUMN)
        )

    return (
        rows(in_target & among(updates), before, ChangeType.UPDATE_PREIMAGE)
        .unionByName(rows(in_target & among(updates), after, ChangeType.UPDATE_POSTIMAGE))
        .unionByName(rows(in_target & among(deletes), before, ChangeType.DELETE))
        .unionByName(rows(among(inserts), after, ChangeType.INSERT))
    )
