"""A small MERGE source brought to the driver once, so that matching runs without Spark jobs.

When the ON condition is key equalities alone (``t.id = s.id AND ...``) on integral or string
columns typed alike on both sides, no matched clause has a condition, and Spark's estimate
of the source stays under :data:`DRIVER_SOURCE_BYTES`, one ``toArrow`` job brings the source
to the driver. (A source Spark cannot size, such as rows from a Python list, is cached and
counted first, and comes to the driver if it then fits.) Its row count and key range then
cost nothing, the candidate files' key columns are joined with its keys in pyarrow
(:mod:`deltatx.log.row_level.arrow_join`), and the write reads the rows back from the
driver's copy, which also keeps both passes on the same source rows. Anything else leaves
the MERGE to Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltatx.kernel.schema import StructType
from deltatx.log.row_level.arrow_join import key_kinds
from deltatx.spark.commands.common import to_spark_schema
from deltatx.spark.commands.merge_clauses import MergeClause, source_column
from deltatx.spark.expressions import merge_equi_keys
from deltatx.spark.schema import quote_column

DRIVER_SOURCE_BYTES = 256 << 20
"""Largest source (Spark's size estimate, in bytes) a MERGE collects to the driver."""
DRIVER_SOURCE_ROWS = 1_000_000
"""Most rows of a source Spark could not size beforehand that a MERGE collects."""
_UNKNOWN = 2**63 - 1

# Types whose values come back from Arrow exactly as Spark holds them.
_EXACT_TYPES = (
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.BooleanType,
    T.DateType,
    T.BinaryType,
    T.DecimalType,
)
_KEY_TYPES = frozenset({"tinyint", "smallint", "int", "bigint", "string"})


@dataclass(frozen=True, slots=True)
class DriverSource:
    """How a MERGE source is held on the driver.

    Attributes:
        schema: The source's schema plus the row id column.
        alias: The qualifier the ON condition gives the source.
        keys: (target key column, source key column) per key equality.
        row_id: The name of the row id column (a row's position in the collected table).
    """

    schema: T.StructType
    alias: str
    keys: list[tuple[str, str]]
    row_id: str

    def collect(self, source: DataFrame) -> pa.Table:
        """The source's rows (one Spark job), each with its position as row id."""
        table = source.toArrow()
        ids = pa.array(np.arange(table.num_rows, dtype=np.int64))
        return table.append_column(self.row_id, ids)

    def names(self, source: DataFrame) -> bool:
        """Whether ``source`` carries the ON condition's source alias (no job, no analysis).

        Only a DataFrame whose plan ends in that alias counts (``df.alias("s")``, spelt as
        the condition spells it): then ``s.column`` resolves to its column as Spark reads it.
        """
        try:
            plan = source._jdf.queryExecution().analyzed()
            return bool(plan.nodeName() == "SubqueryAlias" and plan.alias() == self.alias)
        except Exception:
            return False  # another kind of session: Spark analyses the merge

    def frame(self, spark: SparkSession, rows: pa.Table | None = None) -> DataFrame:
        """``rows`` (None: no row) as the source DataFrame.

        Each column is also carried under its :func:`source_column` name, as the merge's
        expressions expect it.
        """
        df = (
            spark.createDataFrame([], schema=self.schema)
            if rows is None
            else spark.createDataFrame(rows, schema=self.schema)
        ).alias(self.alias)
        names = [f.name for f in self.schema.fields if f.name != self.row_id]
        return df.select(
            "*", *[F.col(quote_column(c)).alias(source_column(i)) for i, c in enumerate(names)]
        )


def plan_driver_source(
    source: DataFrame,
    condition: object,
    *,
    schema: StructType,
    target_alias: str,
    clauses: Sequence[MergeClause],
    row_id: str,
) -> DriverSource | None:
    """How to hold ``source`` on the driver, or None when the MERGE must stay in Spark."""
    if not isinstance(condition, str) or "\\" in condition:
        return None
    if any(c.kind.group == "matched" and c.condition is not None for c in clauses):
        return None
    pairs = merge_equi_keys(condition, schema=schema, target_alias=target_alias)
    if not pairs or len({q.lower() for _, q, _ in pairs}) != 1:
        return None
    if key_kinds(schema, [t for t, _, _ in pairs]) is None:
        return None
    fields = source.schema.fields
    by_name: dict[str, list[T.StructField]] = {}
    for f in fields:
        by_name.setdefault(f.name.lower(), []).append(f)
    if any(len(v) > 1 for v in by_name.values()) or row_id.lower() in by_name:
        return None
    if not all(_exact(f.dataType) for f in fields):
        return None
    target_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    keys: list[tuple[str, str]] = []
    for target, _, column in pairs:
        found = by_name.get(column.lower())
        if not found:
            return None
        data_type = found[0].dataType
        if data_type != target_types[target] or data_type.simpleString() not in _KEY_TYPES:
            return None
        keys.append((target, found[0].name))
    return DriverSource(
        schema=T.StructType([*fields, T.StructField(row_id, T.LongType(), False)]),
        alias=pairs[0][1],
        keys=keys,
        row_id=row_id,
    )


def _exact(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StringType):
        return data_type.simpleString() == "string"  # no collation
    return isinstance(data_type, _EXACT_TYPES)


def source_size(source: DataFrame) -> int | None:
    """Spark's estimate of the source's size in bytes (no job), None when it has none."""
    try:
        size = source._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
    except Exception:
        return None  # another kind of session: no estimate
    # py4j hands a Scala BigInt over as a Python int; older bridges as an object.
    value = size if isinstance(size, int) else int(str(size.toString()))
    # Spark's "unknown" is its default size, the largest long.
    return None if value >= _UNKNOWN else value


def fits(rows: int | None, size: int | None) -> bool:
    """Whether a source of ``size`` bytes (``rows`` rows, if counted) may come to the driver."""
    within = rows is None or rows <= DRIVER_SOURCE_ROWS
    return size is not None and size <= DRIVER_SOURCE_BYTES and within
