"""DataFrame steps sent to the JVM in one call each, where PySpark would make many.

Every column PySpark builds costs the driver several round trips to the JVM (it looks the
active session up for each), and a list goes over one element per call: a read of a few
dozen files with a few helper columns waited longer on the JVM than Spark took to plan it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

SEPARATOR = "\n"
"""Strings go to the JVM, and Spark's listings come back, as one string split on this; an
item holding it is sent on its own (see :func:`java_strings`)."""


def read_parquet(spark: SparkSession, reader: DataFrameReader, paths: list[str]) -> DataFrame:
    """``reader.parquet(*paths)``, with the paths sent to the JVM in one string.

    PySpark hands a list to the JVM one element per call (200 files: 200 round trips, a
    tenth of a second on a busy driver); the JVM splits one string into the array itself.
    """
    array = java_strings(spark, paths)
    if array is None:
        return reader.parquet(*paths)
    return DataFrame(reader._jreader.parquet(array), spark)


def load_paths(spark: SparkSession, reader: DataFrameReader, paths: list[str]) -> DataFrame:
    """``reader.load(*paths)`` (a reader of any format), the paths sent as :func:`read_parquet`."""
    array = java_strings(spark, paths)
    if array is None:
        return reader.load(paths)
    return DataFrame(reader._jreader.load(array), spark)


def select_exprs(spark: SparkSession, df: DataFrame, exprs: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*exprs)``, the expressions sent to the JVM in one string.

    Each column built in Python costs the driver several JVM round trips (PySpark looks the
    active session up for each); a plan of a few columns then waits on the JVM longer than
    Spark takes to analyse it.
    """
    array = java_strings(spark, exprs)
    if array is None:
        return df.selectExpr(*exprs)
    return DataFrame(df._jdf.selectExpr(array), spark)


def sort_within_partitions(spark: SparkSession, df: DataFrame, names: Sequence[str]) -> DataFrame:
    """``df.sortWithinPartitions(*names)`` (columns by name), sent as :func:`select_exprs` is."""
    array = java_strings(spark, names[1:])
    if array is None:
        return df.sortWithinPartitions(*names)
    return DataFrame(df._jdf.sortWithinPartitions(names[0], array), spark)


def java_strings(spark: SparkSession, items: Sequence[str]) -> Any:
    """``items`` as a Java ``String[]`` made in one call, or None where that cannot be exact.

    Java's split drops trailing empty strings and would cut an item holding the separator:
    no items, an empty item or the separator in one gives None.
    """
    if not items or any(not item or SEPARATOR in item for item in items):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.java.util.regex.Pattern.compile(SEPARATOR).split(SEPARATOR.join(items))
