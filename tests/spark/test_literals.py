"""Literal arrays built on the JVM: the values Spark reads back, and the way out when it can't."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltatx.spark import literals
from deltatx.spark.literals import long_array


def _read_back(spark: SparkSession, values: np.ndarray) -> list[Any]:
    column = long_array(spark, values)
    assert column is not None
    (row,) = spark.range(1).select(column.alias("a")).collect()
    return list(row["a"])


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=40))
def test_values_read_back_as_given(spark: SparkSession, values: list[int]) -> None:
    assert _read_back(spark, np.array(values, dtype=np.int64)) == values


def test_smaller_integer_types_widen(spark: SparkSession) -> None:
    assert _read_back(spark, np.array([-3, 0, 7], dtype=np.int8)) == [-3, 0, 7]


def test_generated_code_reads_elements_in_place(spark: SparkSession) -> None:
    # The element a row reads depends on the row; past the end there is none (NULL).
    column = long_array(spark, np.arange(100, 110, dtype=np.int64))
    assert column is not None
    got = spark.range(12).select(F.get(column, F.col("id").cast("int")).alias("v")).collect()
    assert [r["v"] for r in got] == [*range(100, 110), None, None]
    plan = spark.range(1).select(column)._jdf.queryExecution().executedPlan().toString()
    # Spark prints the block's name, never its elements, in every plan it describes.
    assert "UnsafeArrayData" in plan and "109" not in plan


def test_a_session_without_a_jvm_gets_none(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoContext:
        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("Spark Connect sessions have no SparkContext")

    assert long_array(NoContext(), np.array([1])) is None  # type: ignore[arg-type]


def test_a_call_the_jvm_refuses_gets_none(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Missing:
        def __getattr__(self, name: str) -> Any:
            raise AttributeError(name)

    jvm = spark.sparkContext._jvm
    monkeypatch.setattr(literals, "_classes", (jvm, Missing()))
    assert long_array(spark, np.array([1])) is None
