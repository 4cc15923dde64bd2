"""The data path: the only package that imports pyspark.

``spark_session`` is loaded on first use, so that the Spark-free parts of this package (SQL
conditions parsed into the predicate IR) can serve log-only tools without loading pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltatx.spark.session import spark_session

__all__ = ["spark_session"]


def __getattr__(name: str) -> Any:
    if name == "spark_session":
        from deltatx.spark.session import spark_session

        return spark_session
    raise AttributeError(f"module 'deltatx.spark' has no attribute {name!r}")
