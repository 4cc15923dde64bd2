"""Which rows a DELETE or UPDATE condition matches, found without a Spark job when possible.

The condition's columns of the candidate files (already pruned by partition values and
statistics) are read on the driver with pyarrow
(:mod:`deltatx.log.row_level.arrow_matching`); a condition whose pyarrow evaluation might
differ from Spark's is left to the command's Spark job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import Column

from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Expression
from deltatx.log.row_level.arrow_matching import FileRows, driver_matches
from deltatx.log.row_level.row_indexes import RowIndexes
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.rewrite import FileMatches

__all__ = ["FileRows", "as_file_matches", "find_on_driver", "matched_addresses"]

# Text sqlglot reads but Spark's parser refuses: statement separators and IN lists that are
# empty, lack their parentheses or have a stray comma ("IN ()", "IN 1", "IN (1,)").
_SPARK_REFUSES = re.compile(r";|,\s*[,)]|\(\s*,|\bIN\b(?!\s*\(\s*[^\s)])", re.IGNORECASE)


def find_on_driver(
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    predicate: Expression | None,
    condition: str | Column | None,
    *,
    keep_values: int = 0,
) -> dict[int, FileRows] | None:
    """Candidate index -> matched live rows of every candidate, or None to use Spark.

    With ``keep_values``, up to that many matched rows keep the condition's columns
    (:attr:`FileRows.values`) for a caller that reads those rows again.

    Only SQL text is translated (a Column's rendering is not always its meaning), and never
    text with a backslash, whose escapes Spark and the translator might read differently. A
    result means the condition was translated whole, so Spark would resolve it too (callers
    skip Spark's analysis); text Spark's parser might refuse is never translated.

    Raises:
        InvalidTableError: A candidate data file is missing or is not readable Parquet.
    """
    if predicate is None or not isinstance(condition, str) or "\\" in condition:
        return None
    if _SPARK_REFUSES.search(condition):
        return None
    return driver_matches(
        txn.log.location,
        candidates,
        predicate,
        txn.schema,
        column_mapping=txn.configuration.column_mapping_mode,
        keep_values=keep_values,
        partition_columns=txn.partition_columns,
    )


def matched_addresses(found: dict[int, FileRows]) -> dict[int, RowIndexes]:
    """Candidate index -> matched row indexes, for the candidates with a match."""
    return {i: r.matched for i, r in found.items() if len(r.matched)}


def as_file_matches(candidates: Sequence[AddFile], found: dict[int, FileRows]) -> list[FileMatches]:
    """The candidates with a match, counted as copy-on-write wants them."""
    return [
        FileMatches(candidates[i], len(r.matched), r.live)
        for i, r in found.items()
        if len(r.matched)
    ]
