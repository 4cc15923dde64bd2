"""The Spark session entry points users call: :func:`spark_session` and :func:`configure`.

Both set a session up for deltatx's data source (see :mod:`deltatx.spark.datasource`) and
install the facade's handler of ``saveAsTable``, which needs table names and so cannot live in
the data source's layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from deltatx.catalog import table_path
from deltatx.spark.datasource import configure as configure_data_source
from deltatx.spark.datasource.save import set_table_locator, set_table_writer
from deltatx.spark.reader_extension import extension_jar
from deltatx.spark.session import spark_session as session_of
from deltatx.table_creation import save_as_table


def configure(spark: SparkSession) -> SparkSession:
    """Registers deltatx's data source on a session the user or a cluster built.

    Afterwards ``spark.read.format("deltatx")`` and ``df.write.format("deltatx")`` work, so
    does the short name ``delta`` unless delta-spark is loaded in the session, and
    ``saveAsTable(name)`` with either name writes a named Delta table, and
    ``writeStream.toTable(name)`` streams into an existing one. The Python workers of
    the session's executors must be able to import deltatx.

    Args:
        spark: The session to configure.

    Returns:
        The same session, for chaining.
    """
    set_table_writer(save_as_table)
    set_table_locator(table_path)
    return configure_data_source(spark)


def spark_session(
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    config: Mapping[str, str] | None = None,
    ui: bool | None = None,
    app_name: str = "deltatx",
) -> SparkSession:
    """The active SparkSession, or a new local one with deltatx's defaults, configured.

    See :func:`deltatx.spark.session.spark_session` for the arguments and defaults; the
    session is then set up as :func:`configure` does.

    Raises:
        JavaNotFoundError: A local session is needed and no Java runtime is installed.
    """
    set_table_writer(save_as_table)
    set_table_locator(table_path)
    return session_of(
        master=master, driver_memory=driver_memory, config=config, ui=ui, app_name=app_name
    )


def spark_jar() -> str:
    """The path of deltatx's Spark reader extension jar, compiled on first use and cached.

    Sessions started by :func:`spark_session` load it already. For a session built
    elsewhere (a cluster, ``spark-submit``), put this path in ``spark.jars`` before the
    session starts: reads of tables with deletion vectors then drop deleted rows inside
    Spark's Parquet reader. Without it they are correct, only slower.

    Raises:
        ExtensionBuildError: There is no Java runtime, or PySpark ships no Janino compiler.
    """
    return str(extension_jar())


__all__ = ["configure", "spark_jar", "spark_session"]
