"""Literal arrays that the generated code reads in place, built on the JVM in a few calls.

A literal array made the ordinary way (``F.lit`` of a list, or a folded ``from_json``) holds
one boxed object per element, which Spark serialises element by element into every stage and
every task deserialises again: 62,500 longs cost a 4M-row scan more than its deletion vectors'
filter itself (measured: 190 ms more JVM CPU per read). An ``UnsafeArrayData`` is one block of
bytes that Spark copies whole, and the generated code reads an element at an offset.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F


@dataclass(frozen=True, slots=True)
class _JvmClasses:
    """The JVM classes a literal is built with, looked up once per gateway.

    Each lookup is a round trip to the JVM.
    """

    unsafe_array: Any
    literal: Any
    column_node: Any
    column: Any
    long_array_type: Any
    byte_array_offset: int


# The classes of the one gateway in use: a session stopped and started again brings a new one.
_classes: tuple[Any, _JvmClasses] | None = None
_lock = threading.Lock()


def long_array(spark: SparkSession, values: np.ndarray) -> Column | None:
    """A literal ``array<bigint>`` column (no NULL elements) holding ``values``.

    Args:
        spark: A classic session (one with a JVM in this process).
        values: The elements, any integer dtype; sent as little-endian int64, the byte order
            of every platform Spark runs on.

    Returns:
        None where the session has no JVM here (Spark Connect) or this Spark lacks the
        classes used: the caller then takes its other path.
    """
    classes = _jvm_classes(spark)
    if classes is None:
        return None
    try:
        from pyspark.sql.classic.column import Column as ClassicColumn

        data = bytearray(np.ascontiguousarray(values, dtype="<i8").tobytes())
        array = classes.unsafe_array.fromPrimitiveArray(
            data, classes.byte_array_offset, len(values), 8
        )
        literal = classes.literal.create(array, classes.long_array_type)
        return ClassicColumn(classes.column(classes.column_node.apply(literal)))
    except Exception:  # any Py4J or import failure: the caller takes its other path
        return None


def long_array_column(spark: SparkSession, values: Sequence[int]) -> Column:
    """A literal ``array<bigint>`` of ``values``.

    One block of bytes where the session can build it (:func:`long_array`), else a folded
    string split.
    """
    block = long_array(spark, np.array(values, dtype=np.int64))
    if block is not None:
        return block
    return F.split(F.lit(",".join(map(str, values))), ",").cast("array<bigint>")


def _jvm_classes(spark: SparkSession) -> _JvmClasses | None:
    try:
        jvm = spark.sparkContext._jvm
    except Exception:  # Spark Connect sessions have no SparkContext
        return None
    if jvm is None:
        return None
    global _classes
    with _lock:
        if _classes is not None and _classes[0] is jvm:
            return _classes[1]
        try:
            types = jvm.org.apache.spark.sql.types.DataTypes
            expressions = jvm.org.apache.spark.sql.catalyst.expressions
            found = _JvmClasses(
                unsafe_array=expressions.UnsafeArrayData,
                literal=expressions.Literal,
                column_node=jvm.org.apache.spark.sql.classic.ExpressionColumnNode,
                column=jvm.org.apache.spark.sql.Column,
                long_array_type=types.createArrayType(types.LongType, False),
                byte_array_offset=int(jvm.org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET),
            )
        except Exception:  # a Spark without these classes: the caller takes its other path
            return None
        _classes = (jvm, found)
        return found
