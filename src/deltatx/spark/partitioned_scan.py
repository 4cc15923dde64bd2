"""Reading partitioned tables with Spark's own partition discovery, so its optimiser prunes them.

:func:`deltatx.spark.scan.files_to_dataframe` gives rows their partition values itself: one
scan per partition, unioned, up to a few dozen partitions (a plan Spark prunes, but each scan
costs tens of milliseconds of planning: 0.6 s for 8 partitions before the query ran), and past
that a join Spark cannot prune through (a query on one day of a 365-day table read every
file). When every file sits in the directories its partition values name (as deltatx and
Spark write them), Spark can read the same files in one scan with ``basePath`` and take the
values from the paths itself; a filter on a partition column then skips the other
directories. The values are still the log's: a file whose directories disagree with its
``partitionValues``, or a partition type whose text form Spark could parse differently
(timestamps, decimals, floats), keeps the scan's own way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession

from deltatx.kernel.actions import AddFile
from deltatx.kernel.schema import PrimitiveType, StructType
from deltatx.spark.arrow_files import spark_reaches
from deltatx.spark.jvm_steps import read_parquet, select_exprs
from deltatx.spark.partition_dirs import HIVE_DEFAULT_PARTITION, escape_partition_name
from deltatx.spark.scan import listed_on_driver
from deltatx.spark.schema import quote_column, to_spark_schema
from deltatx.spark.write import TableLocation

# Partition types whose directory text Spark casts back to exactly the log's value.
_EXACT_TYPES = frozenset({"string", "byte", "short", "integer", "long", "date", "boolean"})
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _directories(add: AddFile, columns: Sequence[str]) -> str:
    lowered = {k.lower(): v for k, v in add.partition_values.items()}
    parts = []
    for column in columns:
        value = lowered.get(column.lower())
        text = (
            HIVE_DEFAULT_PARTITION if value is None or value == "" else escape_partition_name(value)
        )
        parts.append(f"{escape_partition_name(column)}={text}")
    return "/".join(parts)


def partition_discovery_frame(
    spark: SparkSession,
    *,
    table_path: str,
    files: Sequence[AddFile],
    schema: StructType,
    partition_columns: Sequence[str],
) -> DataFrame | None:
    """The rows of ``files`` read with Spark's partition discovery, or None if it cannot be.

    Returns:
        A DataFrame with the columns of ``schema``, or None when the table is not
        partitioned, has a partition type outside the exact ones, or a file is not stored in
        the directories its partition values name.

    Raises:
        InvalidTableError: A file's directory is a symbolic link out of the table root.
    """
    if not files or not partition_columns:
        return None
    by_name = {f.name.lower(): f for f in schema.fields}
    for column in partition_columns:
        field = by_name.get(column.lower())
        if field is None or not isinstance(field.type, PrimitiveType):
            return None
        if field.type.name not in _EXACT_TYPES:
            return None
    location = TableLocation.parse(table_path)
    if not spark_reaches(spark, location.location):
        return None
    # As every scan: a directory inside the table must not lead out of it.
    root = location.location
    root.refuse_links_out(
        [root.file(add.path, what="data file") for add in files], what="data file"
    )
    paths: list[str] = []
    for add in files:
        if _SCHEME.match(add.path) or add.path.startswith("/"):
            return None
        relative = unquote(add.path)
        directory, _, name = relative.rpartition("/")
        if not name or directory != _directories(add, partition_columns):
            return None
        paths.append(_GLOB_CHARS.sub(r"\\\1", location.spark_path(relative)))
    parts = {c.lower() for c in partition_columns}
    data_fields = tuple(f for f in schema.fields if f.name.lower() not in parts)
    part_fields = tuple(by_name[c.lower()] for c in partition_columns)
    read_schema = to_spark_schema(StructType(data_fields + part_fields))
    with listed_on_driver(spark, len(paths)):
        reader = spark.read.schema(read_schema).option("basePath", location.spark_root)
        rows = read_parquet(spark, reader, paths)
    return select_exprs(spark, rows, [quote_column(f.name) for f in schema.fields])
