"""Copy-on-write machinery shared by DELETE, UPDATE and MERGE.

Finding the files to touch costs one small aggregation over the candidate files (already pruned
by partition values and statistics): per file, how many rows match. Files with no match are left
alone and files whose rows all go are dropped without being read again; only the rest are
rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.scan import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, files_to_dataframe

__all__ = ["FILE_INDEX_COLUMN", "ROW_INDEX_COLUMN", "FileMatches", "match_counts", "read_addressed"]


@dataclass(frozen=True, slots=True)
class FileMatches:
    """How many rows of one candidate file match, out of how many."""

    file: AddFile
    matched: int
    total: int

    @property
    def all_match(self) -> bool:
        """Every row of the file matches."""
        return self.matched == self.total


def read_addressed(
    spark: SparkSession, txn: OptimisticTransaction, files: Sequence[AddFile]
) -> DataFrame:
    """The live rows of ``files`` with each row's file index and row index as extra columns.

    Rows deleted by a file's deletion vector are dropped; row indexes stay physical (they
    count deleted rows too), which is what a new deletion vector records.
    """
    from deltatx.spark.deletion_vectors import deleted_rows_filter

    return files_to_dataframe(
        spark,
        table_path=txn.log.table_path,
        files=files,
        schema=txn.schema,
        partition_columns=txn.partition_columns,
        row_filter=deleted_rows_filter(spark, txn.log, files),
        with_address=True,
    )


def match_counts(
    spark: SparkSession,
    txn: OptimisticTransaction,
    files: Sequence[AddFile],
    matches: Column,
) -> list[FileMatches]:
    """Per candidate file with at least one matching row: matched and total row counts."""
    if not files:
        return []
    rows = read_addressed(spark, txn, files)
    hit = F.coalesce(matches, F.lit(False))
    counts = (
        rows.groupBy(FILE_INDEX_COLUMN)
        .agg(
            F.sum(F.when(hit, 1).otherwise(0)).alias("matched"),
            F.count(F.lit(1)).alias("total"),
        )
        .filter("matched > 0")
        .collect()
    )
    return [
        FileMatches(files[int(r[FILE_INDEX_COLUMN])], int(r["matched"]), int(r["total"]))
        for r in counts
    ]


def without_address(df: DataFrame) -> DataFrame:
    """Drops the address columns added by :func:`read_addressed`."""
    return df.drop(FILE_INDEX_COLUMN, ROW_INDEX_COLUMN)
