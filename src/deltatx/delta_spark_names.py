"""delta-spark's camelCase names, so delta-spark code runs after changing one import.

Each name here adapts delta-spark's calling convention (argument order, keyword names, lists
of columns) to the snake_case method it stands for; the mixins are bases of
:class:`~deltatx.tables.DeltaTable`, :class:`~deltatx.builders.MergeBuilder` and
:class:`~deltatx.builders.OptimizeBuilder`. What deltatx does not do is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import DataType, StructField
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError
from deltatx.kernel.features import (
    SUPPORTED_WRITER_FEATURES,
    protocol_with_features,
    reader_features,
    writer_features,
)
from deltatx.kernel.metrics import OptimizeMetrics, RestoreMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.table_configuration import GENERATION_EXPRESSION_KEY
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.session import spark_session
from deltatx.spark.commands.common import (
    parse_schema_argument,
    to_delta_schema,
    to_spark_schema,
)
from deltatx.table_creation import CreateMode, TableSpec, define_table
from deltatx.table_features import drop_feature

Condition = str | Column | None
Assignments = Mapping[str, str | Column]
T = TypeVar("T")


class DeltaTableBuilder(Generic[T]):
    """delta-spark's table builder (``DeltaTable.createIfNotExists(spark).tableName(...)``)."""

    def __init__(
        self, spark: SparkSession, mode: CreateMode, open_table: Callable[[SparkSession, str], T]
    ) -> None:
        """Use ``DeltaTable.createIfNotExists``, ``createOrReplace`` or ``replace``."""
        self._spark = spark
        self._mode = mode
        self._open = open_table
        self._name: str | None = None
        self._location: str | None = None
        self._comment: str | None = None
        self._properties: dict[str, str] = {}
        self._fields: list[StructField] = []
        self._partition_by: list[str] = []

    def tableName(self, identifier: str) -> Self:
        """The table's name (resolved as in :mod:`deltatx.catalog`)."""
        self._name = identifier
        return self

    def location(self, location: str) -> Self:
        """Where the table lives (by name: an external table; alone: the table's path)."""
        self._location = location
        return self

    def comment(self, comment: str) -> Self:
        """The table's description."""
        self._comment = comment
        return self

    def property(self, key: str, value: str) -> Self:
        """A table property."""
        self._properties[key] = value
        return self

    def addColumn(
        self,
        colName: str,
        dataType: str | DataType,
        nullable: bool = True,
        generatedAlwaysAs: str | None = None,
        generatedByDefaultAs: str | None = None,
        comment: str | None = None,
    ) -> Self:
        """A column; ``generatedAlwaysAs`` makes it a generated column (SQL over the others).

        Raises:
            UnsupportedFeatureError: ``generatedByDefaultAs`` (identity columns are not built).
        """
        if generatedByDefaultAs is not None:
            raise UnsupportedFeatureError(
                "identity columns (generatedByDefaultAs) are not supported",
                feature="identityColumns",
            )
        if isinstance(dataType, str):
            parsed = to_spark_schema(parse_schema_argument(f"`{colName}` {dataType}"))
            spark_type = parsed.fields[0].dataType
        else:
            spark_type = dataType
        metadata: dict[str, str] = {"comment": comment} if comment is not None else {}
        if generatedAlwaysAs is not None:
            metadata[GENERATION_EXPRESSION_KEY] = generatedAlwaysAs
        self._fields.append(StructField(colName, spark_type, nullable, metadata))
        return self

    def addColumns(self, cols: SparkStructType | list[StructField]) -> Self:
        """Several columns at once."""
        self._fields.extend(cols.fields if isinstance(cols, SparkStructType) else cols)
        return self

    def partitionedBy(self, *cols: str | list[str] | tuple[str, ...]) -> Self:
        """Partition columns."""
        self._partition_by.extend(_flatten(cols))
        return self

    def clusterBy(self, *cols: str) -> Self:
        """Refused: deltatx does not build liquid clustering."""
        raise UnsupportedFeatureError(
            "clusterBy is not supported: deltatx has no liquid clustering", feature="clustering"
        )

    def execute(self) -> T:
        """Creates (or replaces) the table and returns a handle on it."""
        if self._name is None and self._location is None:
            raise InvalidArgumentError("the builder needs tableName(...) or location(...)")
        spec = TableSpec(
            name=self._name,
            path=self._location if self._name is None else None,
            location=self._location if self._name is not None else None,
            schema=to_delta_schema(SparkStructType(self._fields)) if self._fields else None,
            partition_by=tuple(self._partition_by),
            properties=dict(self._properties),
            comment=self._comment,
        )
        return self._open(self._spark, define_table(self._spark, spec, mode=self._mode))


class DeltaTableNames:
    """delta-spark's ``DeltaTable`` names (``forPath``, ``toDF``, ``restoreToVersion``, ...)."""

    if TYPE_CHECKING:
        _spark: SparkSession

        @property
        def log(self) -> DeltaLog: ...

        @classmethod
        def for_path(cls, spark: SparkSession, path: str) -> Self: ...

        @classmethod
        def for_name(cls, spark: SparkSession, name: str) -> Self: ...

        @classmethod
        def is_delta_table(cls, spark: SparkSession, path: str) -> bool: ...

        def to_df(
            self, *, version: int | None = None, timestamp: int | str | datetime | None = None
        ) -> DataFrame: ...

        def restore_to_version(self, version: int) -> RestoreMetrics: ...

        def restore_to_timestamp(self, timestamp: int | str | datetime) -> RestoreMetrics: ...

    @classmethod
    def forPath(
        cls, sparkSession: SparkSession, path: str, hadoopConf: Mapping[str, str] | None = None
    ) -> Self:
        """delta-spark ``DeltaTable.forPath``; ``hadoopConf`` is refused when not empty."""
        if hadoopConf:
            raise UnsupportedFeatureError(
                "forPath(hadoopConf=...) is not supported: deltatx reads local paths and "
                "file: URIs without Hadoop options",
                feature="hadoopConf",
            )
        return cls.for_path(sparkSession, path)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> Self:
        """delta-spark ``DeltaTable.forName``."""
        return cls.for_name(sparkSession, tableOrViewName)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """delta-spark ``DeltaTable.isDeltaTable`` (a path)."""
        return cls.is_delta_table(sparkSession, identifier)

    @classmethod
    def convertToDelta(cls, *args: Any, **kwargs: Any) -> Self:
        """Refused: deltatx does not convert Parquet tables in place."""
        raise UnsupportedFeatureError(
            "convertToDelta is not supported: write the data with deltatx.write instead",
            feature="convertToDelta",
        )

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[Self]:
        """delta-spark ``DeltaTable.createIfNotExists``: a builder."""
        return DeltaTableBuilder(
            sparkSession or spark_session(), CreateMode.IF_NOT_EXISTS, cls.for_path
        )

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[Self]:
        """delta-spark ``DeltaTable.createOrReplace``: a builder."""
        return DeltaTableBuilder(
            sparkSession or spark_session(), CreateMode.CREATE_OR_REPLACE, cls.for_path
        )

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[Self]:
        """delta-spark ``DeltaTable.replace``: a builder."""
        return DeltaTableBuilder(sparkSession or spark_session(), CreateMode.REPLACE, cls.for_path)

    def toDF(self) -> DataFrame:
        """delta-spark ``toDF``: the latest version as a DataFrame."""
        return self.to_df()

    def restoreToVersion(self, version: int) -> RestoreMetrics:
        """delta-spark ``restoreToVersion``."""
        return self.restore_to_version(version)

    def restoreToTimestamp(self, timestamp: str | datetime) -> RestoreMetrics:
        """delta-spark ``restoreToTimestamp``."""
        return self.restore_to_timestamp(timestamp)

    def generate(self, mode: str) -> None:
        """Refused: deltatx writes no manifest files."""
        raise UnsupportedFeatureError(
            f"generate('{mode}') is not supported: deltatx writes no manifest files",
            feature="generate",
        )

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """delta-spark ``upgradeTableProtocol``: a no-op when the table is already there.

        Raises:
            UnsupportedFeatureError: The versions ask for more than the table has; name the
                features with :meth:`addFeatureSupport` instead.
        """
        protocol = self.log.snapshot().protocol
        if (
            readerVersion <= protocol.min_reader_version
            and writerVersion <= protocol.min_writer_version
        ):
            return
        raise UnsupportedFeatureError(
            f"upgradeTableProtocol({readerVersion}, {writerVersion}) is not supported: "
            f"name the features the table needs with addFeatureSupport(...) or a table "
            f"property such as delta.enableDeletionVectors",
            feature="upgradeTableProtocol",
        )

    def addFeatureSupport(self, featureName: str) -> None:
        """delta-spark ``addFeatureSupport``: names a feature deltatx supports in the protocol.

        Raises:
            UnsupportedFeatureError: deltatx does not support writing tables with the feature.
        """
        name = next(
            (f for f in SUPPORTED_WRITER_FEATURES if f.lower() == featureName.lower()), None
        )
        if name is None:
            raise UnsupportedFeatureError(
                f"deltatx cannot add table feature '{featureName}'", feature=featureName
            )
        snapshot = self.log.snapshot()
        current = snapshot.protocol
        if name in reader_features(current) | writer_features(current):
            return
        txn = OptimisticTransaction(self.log, snapshot)
        txn.update_protocol(protocol_with_features(current, [name]))
        txn.record_operation(Operation(OperationName.UPGRADE_PROTOCOL, {"feature": name}), {})
        txn.commit()

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """delta-spark ``dropFeatureSupport`` (see :func:`deltatx.table_features.drop_feature`)."""
        if truncateHistory:
            raise UnsupportedFeatureError(
                "dropFeatureSupport(truncateHistory=True) is not supported: deltatx keeps the "
                "history and drops the feature from the newest version on",
                feature="truncateHistory",
            )
        drop_feature(self._spark, self.log, featureName)


def _flatten(columns: Iterable[str | list[str] | tuple[str, ...]]) -> list[str]:
    out: list[str] = []
    for c in columns:
        if isinstance(c, list | tuple):
            out.extend(c)
        else:
            out.append(c)
    return out


class MergeBuilderNames:
    """delta-spark's merge builder names: ``whenMatchedUpdate(condition, set)`` and so on."""

    if TYPE_CHECKING:

        def when_matched_update(self, set: Assignments, condition: Condition = None) -> Self: ...

        def when_matched_update_all(self, condition: Condition = None) -> Self: ...

        def when_matched_delete(self, condition: Condition = None) -> Self: ...

        def when_not_matched_insert(
            self, values: Assignments, condition: Condition = None
        ) -> Self: ...

        def when_not_matched_insert_all(self, condition: Condition = None) -> Self: ...

        def when_not_matched_by_source_update(
            self, set: Assignments, condition: Condition = None
        ) -> Self: ...

        def when_not_matched_by_source_delete(self, condition: Condition = None) -> Self: ...

        def with_schema_evolution(self) -> Self: ...

    def whenMatchedUpdate(
        self, condition: Condition = None, set: Assignments | None = None
    ) -> Self:
        """delta-spark ``whenMatchedUpdate(condition=None, set=None)``."""
        if set is None:
            raise InvalidArgumentError("whenMatchedUpdate needs set={column: expression}")
        return self.when_matched_update(set, condition)

    def whenMatchedUpdateAll(self, condition: Condition = None) -> Self:
        """delta-spark ``whenMatchedUpdateAll``."""
        return self.when_matched_update_all(condition)

    def whenMatchedDelete(self, condition: Condition = None) -> Self:
        """delta-spark ``whenMatchedDelete``."""
        return self.when_matched_delete(condition)

    def whenNotMatchedInsert(
        self, condition: Condition = None, values: Assignments | None = None
    ) -> Self:
        """delta-spark ``whenNotMatchedInsert(condition=None, values=None)``."""
        if values is None:
            raise InvalidArgumentError("whenNotMatchedInsert needs values={column: expression}")
        return self.when_not_matched_insert(values, condition)

    def whenNotMatchedInsertAll(self, condition: Condition = None) -> Self:
        """delta-spark ``whenNotMatchedInsertAll``."""
        return self.when_not_matched_insert_all(condition)

    def whenNotMatchedBySourceUpdate(
        self, condition: Condition = None, set: Assignments | None = None
    ) -> Self:
        """delta-spark ``whenNotMatchedBySourceUpdate(condition=None, set=None)``."""
        if set is None:
            raise InvalidArgumentError(
                "whenNotMatchedBySourceUpdate needs set={column: expression}"
            )
        return self.when_not_matched_by_source_update(set, condition)

    def whenNotMatchedBySourceDelete(self, condition: Condition = None) -> Self:
        """delta-spark ``whenNotMatchedBySourceDelete``."""
        return self.when_not_matched_by_source_delete(condition)

    def withSchemaEvolution(self) -> Self:
        """delta-spark ``withSchemaEvolution``."""
        return self.with_schema_evolution()


class OptimizeBuilderNames:
    """delta-spark's optimize builder names."""

    if TYPE_CHECKING:

        def execute_compaction(self, *, target_size: int | None = None) -> OptimizeMetrics: ...

        def execute_z_order_by(
            self, *columns: str, target_size: int | None = None
        ) -> OptimizeMetrics: ...

    def executeCompaction(self) -> OptimizeMetrics:
        """delta-spark ``executeCompaction``."""
        return self.execute_compaction()

    def executeZOrderBy(self, *cols: str | list[str] | tuple[str, ...]) -> OptimizeMetrics:
        """delta-spark ``executeZOrderBy``: columns as arguments or as one list."""
        return self.execute_z_order_by(*_flatten(cols))


# The mapping, for the migration guide and its test: delta-spark name -> deltatx name.
NAMES: dict[str, str] = {
    "DeltaTable.forPath": "DeltaTable.for_path",
    "DeltaTable.forName": "DeltaTable.for_name",
    "DeltaTable.isDeltaTable": "DeltaTable.is_delta_table",
    "DeltaTable.toDF": "DeltaTable.to_df",
    "DeltaTable.createIfNotExists": "(builder; CREATE TABLE IF NOT EXISTS)",
    "DeltaTable.createOrReplace": "(builder; CREATE OR REPLACE TABLE)",
    "DeltaTable.replace": "(builder; replaces an existing table)",
    "DeltaTable.restoreToVersion": "DeltaTable.restore_to_version",
    "DeltaTable.restoreToTimestamp": "DeltaTable.restore_to_timestamp",
    "DeltaTable.addFeatureSupport": "(deltatx adds the feature to the protocol)",
    "DeltaTable.dropFeatureSupport": "deltatx.table_features.drop_feature",
    "DeltaTable.upgradeTableProtocol": "(no-op when already met, else refused)",
    "DeltaTable.generate": "(refused)",
    "DeltaTable.convertToDelta": "(refused)",
    "DeltaMergeBuilder.whenMatchedUpdate": "MergeBuilder.when_matched_update",
    "DeltaMergeBuilder.whenMatchedUpdateAll": "MergeBuilder.when_matched_update_all",
    "DeltaMergeBuilder.whenMatchedDelete": "MergeBuilder.when_matched_delete",
    "DeltaMergeBuilder.whenNotMatchedInsert": "MergeBuilder.when_not_matched_insert",
    "DeltaMergeBuilder.whenNotMatchedInsertAll": "MergeBuilder.when_not_matched_insert_all",
    "DeltaMergeBuilder.whenNotMatchedBySourceUpdate": (
        "MergeBuilder.when_not_matched_by_source_update"
    ),
    "DeltaMergeBuilder.whenNotMatchedBySourceDelete": (
        "MergeBuilder.when_not_matched_by_source_delete"
    ),
    "DeltaMergeBuilder.withSchemaEvolution": "MergeBuilder.with_schema_evolution",
    "DeltaOptimizeBuilder.executeCompaction": "OptimizeBuilder.execute_compaction",
    "DeltaOptimizeBuilder.executeZOrderBy": "OptimizeBuilder.execute_z_order_by",
}

__all__ = [
    "NAMES",
    "DeltaTableBuilder",
    "DeltaTableNames",
    "MergeBuilderNames",
    "OptimizeBuilderNames",
]
