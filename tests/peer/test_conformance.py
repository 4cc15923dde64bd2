"""Conformance with delta-spark: the delta-spark columns of the table in interop.conformance.

delta-spark builds every feature's table with SQL and deltatx must read exactly its rows;
deltatx builds every table it can write and delta-spark must read exactly deltatx's rows.
Rows are compared at every version under ``make peer``, at a sample under ``make test``
(``tables.compared_versions``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deltatx.kernel.features import writer_features
from deltatx.log.delta_log import DeltaLog
from interop.conformance import BY_NAME, FEATURES, Feature, canonical, deltatx_rows

from .engine import DeltaSpark
from .tables import compared_versions

NAMES = [f.name for f in FEATURES]


def _assert_uses_feature(feature: Feature, path: str) -> None:
    snapshot = DeltaLog.for_table(path).snapshot()
    if feature.writer_feature is not None:
        assert feature.writer_feature in writer_features(snapshot.protocol)
    if feature.property_key is not None:
        assert feature.property_key in snapshot.metadata.configuration


@pytest.mark.sample(every=4)
@pytest.mark.parametrize("name", NAMES)
def test_deltatx_reads_every_version_delta_spark_wrote(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    feature = BY_NAME[name]
    path = str(tmp_path / name)
    for statement in feature.delta_spark:
        delta_spark.sql(statement.format(t=f"delta.`{path}`"))
    _assert_uses_feature(feature, path)
    for version in compared_versions(path):
        assert deltatx_rows(spark, path, version) == canonical(delta_spark.rows(path, version)), (
            version
        )


@pytest.mark.sample(every=4, offset=2)
@pytest.mark.parametrize("name", NAMES)
def test_delta_spark_reads_every_version_deltatx_wrote(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    feature = BY_NAME[name]
    if isinstance(feature.deltatx, str):
        pytest.skip(feature.deltatx)
    path = str(tmp_path / name)
    feature.deltatx(spark, path)
    _assert_uses_feature(feature, path)
    for version in compared_versions(path):
        assert canonical(delta_spark.rows(path, version)) == deltatx_rows(spark, path, version), (
            version
        )
