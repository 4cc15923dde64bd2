"""The data path: the only package that imports pyspark."""

from deltatx.spark.session import spark_session

__all__ = ["spark_session"]
