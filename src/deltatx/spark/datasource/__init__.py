"""``format("delta")`` for Spark's readers and writers, through Spark's Python Data Source API.

:func:`configure` registers the source under ``deltatx`` always, and under ``delta`` when the
session has no JVM Delta Lake source (delta-spark) loaded, so that existing jobs run as they
are. Spark runs a Python data source's planning (schema, filters, partitions, commit) in
Python processes of its own, so everything a source holds between calls is plain, picklable
data; the table version is pinned when Spark first asks for the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import InvalidArgumentError, TableNotFoundError, UnsupportedOptionError
from deltatx.kernel.schema import parse_schema
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.datasource.reader import DeltaReader
from deltatx.spark.schema import to_spark_schema

SHORT_NAME = "deltatx"
"""The name the source is always registered under."""

DELTA_NAME = "delta"
"""The name it also takes when no JVM Delta Lake source is loaded."""

READ_OPTIONS = frozenset({"path", "versionAsOf", "timestampAsOf"})
"""The reader's options (matched case-insensitively, as Spark matches option names)."""

_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# Settings that show delta-spark is on the classpath; its own source then keeps "delta".
_JVM_DELTA_MARKERS: tuple[tuple[str, str], ...] = (
    ("spark.sql.extensions", "io.delta."),
    ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta."),
    ("spark.jars.packages", "io.delta:delta-"),
    ("spark.jars", "delta-spark"),
    ("spark.jars", "delta-core"),
)


def jvm_delta_loaded(spark: SparkSession) -> bool:
    """Whether the session is configured with delta-spark (its JVM ``delta`` source)."""
    for key, marker in _JVM_DELTA_MARKERS:
        try:
            value = spark.conf.get(key, None)
        except Exception:
            value = None
        if value and marker in value:
            return True
    return False


def configure(spark: SparkSession) -> SparkSession:
    """Registers deltatx's data source on a session the user or a cluster built.

    Afterwards ``spark.read.format("deltatx")`` and ``df.write.format("deltatx")`` work, and
    so does the short name ``delta`` unless delta-spark is loaded in the session. The Python
    workers of the session's executors must be able to import deltatx.

    Args:
        spark: The session to configure.

    Returns:
        The same session, for chaining.
    """
    # The reader skips files by the filters Spark pushes, which Spark only pushes to a
    # Python data source with this setting on.
    spark.conf.set(_PUSHDOWN_CONF, "true")
    spark.dataSource.register(DeltatxDataSource)
    names = {SHORT_NAME}
    if not jvm_delta_loaded(spark):
        spark.dataSource.register(DeltaDataSource)
        names.add(DELTA_NAME)
    from deltatx.spark.datasource.save import install

    install(frozenset(names))
    return spark


def check_options(options: Mapping[str, str], allowed: frozenset[str], *, what: str) -> None:
    """Refuses any option not in ``allowed``, naming it.

    Raises:
        UnsupportedOptionError: An option deltatx does not implement.
    """
    known = {name.lower() for name in allowed}
    for key in options:
        if key.lower() not in known:
            raise UnsupportedOptionError(
                f"{what} option '{key}' is not supported by deltatx's data source; supported: "
                f"{', '.join(sorted(allowed - {'path'}))}",
                option=key,
            )


def table_path(options: Mapping[str, str]) -> str:
    """The ``path`` given to ``load``/``save``.

    Raises:
        InvalidArgumentError: No path was given.
    """
    path = options.get("path")
    if not path:
        raise InvalidArgumentError(
            "format('delta') needs a table path: load(path) or save(path); for a table by "
            "name use deltatx.sql or DeltaTable"
        )
    return path


class DeltatxDataSource(DataSource):
    """Delta tables as a Spark data source, read and written through deltatx's log."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return SHORT_NAME

    def _pin(self) -> dict[str, Any]:
        pinned: dict[str, Any] | None = getattr(self, "_pinned", None)
        if pinned is not None:
            return pinned
        check_options(self.options, READ_OPTIONS, what="read")
        path = table_path(self.options)
        log = DeltaLog.for_table(path)
        if not log.table_exists():
            raise TableNotFoundError(f"there is no Delta table at {path}")
        version_text = self.options.get("versionAsOf")
        timestamp = self.options.get("timestampAsOf")
        version: int | None = None
        if version_text is not None:
            try:
                version = int(version_text)
            except ValueError:
                raise InvalidArgumentError(
                    f"versionAsOf must be an integer, got {version_text!r}"
                ) from None
        snapshot = log.snapshot(version, timestamp=timestamp)
        pinned = {
            "table_path": log.table_path,
            "version": snapshot.version,
            "table_schema_json": snapshot.metadata.schema_string,
            "partition_columns": snapshot.partition_columns,
            "column_mapping": str(snapshot.table_configuration.column_mapping_mode),
        }
        self._pinned = pinned
        return pinned

    def schema(self) -> SparkStructType:
        """The table schema at the requested version (which is then pinned for the read)."""
        return to_spark_schema(parse_schema(self._pin()["table_schema_json"]))

    def reader(self, schema: SparkStructType) -> DataSourceReader:
        """A reader of the pinned version."""
        return DeltaReader(schema=schema, **self._pin())

    def writer(self, schema: SparkStructType, overwrite: bool) -> DataSourceWriter:
        """A writer that commits the written files as one Delta commit."""
        from deltatx.spark.datasource.writer import DeltaWriter

        return DeltaWriter.create(dict(self.options), schema=schema, overwrite=overwrite)


class DeltaDataSource(DeltatxDataSource):
    """The same source under the name ``delta``."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return DELTA_NAME


__all__ = [
    "DELTA_NAME",
    "SHORT_NAME",
    "DeltaDataSource",
    "DeltatxDataSource",
    "configure",
    "jvm_delta_loaded",
]
