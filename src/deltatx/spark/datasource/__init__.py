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
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import InvalidArgumentError, TableNotFoundError
from deltatx.kernel.schema import parse_schema
from deltatx.log.change_feed import version_range
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.datasource.change_feed import ChangeFeedReader, change_feed_schema
from deltatx.spark.datasource.load import install as install_reader
from deltatx.spark.datasource.options import (
    BATCH_READ_OPTIONS,
    check_options,
    int_option,
    table_path,
)
from deltatx.spark.datasource.reader import DeltaReader
from deltatx.spark.datasource.save import install
from deltatx.spark.datasource.stream_sink import DeltaStreamWriter
from deltatx.spark.datasource.stream_source import (
    STREAM_READ_OPTIONS,
    DeltaStreamReader,
    schema_version,
)
from deltatx.spark.datasource.writer import DeltaWriter
from deltatx.spark.schema import to_spark_schema

SHORT_NAME = "deltatx"
"""The name the source is always registered under."""

DELTA_NAME = "delta"
"""The name it also takes when no JVM Delta Lake source is loaded."""

READ_OPTIONS = BATCH_READ_OPTIONS | frozenset(
    {"readChangeFeed", "startingVersion", "endingVersion", "startingTimestamp", "endingTimestamp"}
)
"""A batch read of the change data feed: a range of versions or timestamps."""

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
    install(frozenset(names))
    install_reader(frozenset(names))
    return spark


def _streaming_options(options: Mapping[str, str]) -> bool:
    known = {name.lower() for name in STREAM_READ_OPTIONS - {"path"}}
    return any(key.lower() in known for key in options)


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
        check_options(self.options, READ_OPTIONS | STREAM_READ_OPTIONS, what="read")
        path = table_path(self.options)
        log = DeltaLog.for_table(path)
        if not log.table_exists():
            raise TableNotFoundError(f"there is no Delta table at {path}")
        version = int_option(self.options, "versionAsOf")
        timestamp = self.options.get("timestampAsOf")
        change_range: tuple[int, int] | None = None
        change_feed = _flag(self.options, "readChangeFeed")
        if change_feed:
            if version is not None or timestamp is not None:
                raise InvalidArgumentError(
                    "readChangeFeed reads a range of versions: give startingVersion or "
                    "startingTimestamp (and optionally an ending one), not versionAsOf or "
                    "timestampAsOf"
                )
            if _change_feed_start(self.options):
                change_range = _change_range(log, self.options)
                version = change_range[1]
            else:
                # Only a stream may start without a version: with the latest snapshot.
                version = schema_version(log, self.options)
        elif version is None and timestamp is None and _streaming_options(self.options):
            version = schema_version(log, self.options)
        snapshot = log.snapshot(version, timestamp=timestamp)
        pinned = {
            "table_path": log.table_path,
            "version": snapshot.version,
            "table_schema_json": snapshot.metadata.schema_string,
            "partition_columns": snapshot.partition_columns,
            "column_mapping": str(snapshot.table_configuration.column_mapping_mode),
            "change_range": change_range,
            "change_feed": change_feed,
            "metadata": snapshot.metadata,
            "protocol": snapshot.protocol,
        }
        self._pinned = pinned
        return pinned

    def schema(self) -> SparkStructType:
        """The table schema at the requested version (which is then pinned for the read).

        A change feed read adds ``_change_type``, ``_commit_version`` and
        ``_commit_timestamp``.
        """
        pinned = self._pin()
        table_schema = parse_schema(pinned["table_schema_json"])
        if pinned["change_feed"]:
            return change_feed_schema(table_schema)
        return to_spark_schema(table_schema)

    def reader(self, schema: SparkStructType) -> DataSourceReader:
        """A reader of the pinned version (or of the pinned range's changes)."""
        pinned = self._pin()
        if pinned["change_feed"]:
            check_options(self.options, READ_OPTIONS, what="change data feed read")
            change_range = pinned["change_range"]
            if change_range is None:
                # A batch read of the feed needs a start: this raises the error saying so.
                change_range = _change_range(DeltaLog.for_table(pinned["table_path"]), self.options)
            return ChangeFeedReader(
                table_path=pinned["table_path"],
                start=change_range[0],
                end=change_range[1],
                table_schema_json=pinned["table_schema_json"],
                partition_columns=pinned["partition_columns"],
                column_mapping=pinned["column_mapping"],
            )
        check_options(self.options, BATCH_READ_OPTIONS, what="batch read")
        return DeltaReader(
            schema=schema,
            table_path=pinned["table_path"],
            version=pinned["version"],
            table_schema_json=pinned["table_schema_json"],
            partition_columns=pinned["partition_columns"],
            column_mapping=pinned["column_mapping"],
        )

    def writer(self, schema: SparkStructType, overwrite: bool) -> DataSourceWriter:
        """A writer that commits the written files as one Delta commit."""
        return DeltaWriter.create(dict(self.options), schema=schema, overwrite=overwrite)

    def streamReader(self, schema: SparkStructType) -> DataSourceStreamReader:
        """A stream of the rows appended to the table, or of its changes (``stream_source``)."""
        check_options(self.options, STREAM_READ_OPTIONS, what="streaming read")
        pinned = self._pin()
        metadata, protocol = pinned["metadata"], pinned["protocol"]
        if pinned["change_range"] is not None:
            # The rows follow the schema pinned at the latest version, but the stream judges
            # commits against the state it starts from, as a stream of appended rows does.
            log = DeltaLog.for_table(pinned["table_path"])
            start = log.snapshot(schema_version(log, self.options))
            metadata, protocol = start.metadata, start.protocol
        return DeltaStreamReader(
            schema=schema,
            table_path=pinned["table_path"],
            table_schema_json=pinned["table_schema_json"],
            partition_columns=pinned["partition_columns"],
            column_mapping=pinned["column_mapping"],
            metadata=metadata,
            protocol=protocol,
            options=dict(self.options),
        )

    def streamWriter(self, schema: SparkStructType, overwrite: bool) -> DataSourceStreamWriter:
        """Commits each micro-batch once (``overwrite``: the ``complete`` output mode)."""
        return DeltaStreamWriter.create(dict(self.options), schema=schema, overwrite=overwrite)


def _change_feed_start(options: Mapping[str, str]) -> bool:
    # A stream's startingVersion may be "latest", which names no batch range.
    text = options.get("startingVersion")
    if text is not None and text.strip().lower() == "latest":
        return False
    return text is not None or options.get("startingTimestamp") is not None


def _change_range(log: DeltaLog, options: Mapping[str, str]) -> tuple[int, int]:
    return version_range(
        log,
        starting_version=int_option(options, "startingVersion"),
        ending_version=int_option(options, "endingVersion"),
        starting_timestamp=options.get("startingTimestamp"),
        ending_timestamp=options.get("endingTimestamp"),
    )


def _flag(options: Mapping[str, str], key: str) -> bool:
    text = options.get(key)
    if text is None:
        return False
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidArgumentError(f"{key} must be 'true' or 'false', got {text!r}")
    return lowered == "true"


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
