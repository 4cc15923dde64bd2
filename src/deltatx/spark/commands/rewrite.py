"""Copy-on-write machinery shared by DELETE, UPDATE and MERGE.

Finding the files to touch costs one small aggregation over the candidate files (already pruned
by partition values and statistics): per file, how many rows match. Files with no match are left
alone and files whose rows all go are dropped without being read again; only the rest are
rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import write_data
from deltatx.spark.dv_filter import live_rows_filter
from deltatx.spark.scan import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, files_to_dataframe

__all__ = [
    "FILE_INDEX_COLUMN",
    "ROW_INDEX_COLUMN",
    "FileMatches",
    "Rewritten",
    "match_counts",
    "read_addressed",
    "replaced_vectors",
    "stage_copy_on_write",
]


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

    Rows deleted by a file's deletion vector are dropped by the filter reads use (each task
    loads its own file's vector; no deleted row id passes through the driver); row indexes
    stay physical (they count deleted rows too), which is what a new deletion vector records.
    """
    return files_to_dataframe(
        spark,
        table_path=txn.log.table_path,
        files=files,
        schema=txn.schema,
        partition_columns=txn.partition_columns,
        row_filter=live_rows_filter(txn.log, files),
        with_address=True,
        column_mapping=txn.configuration.column_mapping_mode,
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


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What a copy-on-write statement staged.

    Attributes:
        added: The files written.
        removed: The files dropped (every file holding a matched row).
        matched_rows: Rows the condition matched.
        copied_rows: Unmatched rows rewritten unchanged because they shared a file with a match.
    """

    added: list[AddFile]
    removed: list[AddFile]
    matched_rows: int
    copied_rows: int


def stage_copy_on_write(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    matches: Column,
    *,
    rewrite: Callable[[DataFrame], DataFrame],
    drop_fully_matched: bool,
    counted: Sequence[FileMatches] | None = None,
) -> Rewritten:
    """Rewrites the files holding matched rows (DELETE and UPDATE without deletion vectors).

    Args:
        spark: The session that does the work.
        txn: The transaction to stage into.
        candidates: The files the statement may touch (already pruned).
        matches: Which rows the statement changes (null counts as no).
        rewrite: Turns a touched file's rows into the rows to write back.
        drop_fully_matched: A file whose rows all match is dropped without being read again
            (DELETE); otherwise it is rewritten too (UPDATE).
        counted: The candidates holding matched rows, when already known (the driver found
            them); otherwise one Spark job counts them.
    """
    if counted is None:
        counted = match_counts(spark, txn, candidates, matches)
    rewritten = [m for m in counted if not (drop_fully_matched and m.all_match)]
    added: list[AddFile] = []
    if rewritten:
        rows = without_address(read_addressed(spark, txn, [m.file for m in rewritten]))
        added = write_data(txn, rewrite(rows), recompute_generated=True)
    removed = [m.file for m in counted]
    txn.remove_files(removed)
    txn.add_files(added)
    return Rewritten(
        added=added,
        removed=removed,
        matched_rows=sum(m.matched for m in counted),
        copied_rows=sum(m.total - m.matched for m in rewritten),
    )


def replaced_vectors(candidates: Sequence[AddFile], touched: Collection[int]) -> int:
    """How many existing deletion vectors the touched candidate files had (now replaced)."""
    return sum(1 for i in touched if candidates[i].deletion_vector is not None)
