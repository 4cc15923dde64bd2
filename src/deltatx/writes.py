"""``deltatx.write``: a DataFrame into the Delta table at a path, in one commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from deltatx.progress import operation
from deltatx.spark.durability import log_for
from deltatx.transaction import Transaction


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
    with operation("WRITE", path):
        spark = df.sparkSession
        log = log_for(spark, path)
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


__all__ = ["write"]
