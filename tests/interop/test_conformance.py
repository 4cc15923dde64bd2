"""Conformance: for every feature row, deltatx and independent engines agree at every version.

The rows live in :mod:`interop.conformance`. delta-rs builds each table it can write and deltatx
must read exactly delta-rs's rows at every version; deltatx builds each table it can write and
delta-rs (and DuckDB's delta extension, where it loads without a network) must read exactly
deltatx's rows at every version. The delta-spark columns are in ``tests/peer``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from deltatx.kernel.features import writer_features
from deltatx.log.delta_log import DeltaLog

from .conformance import (
    BY_NAME,
    FEATURES,
    Feature,
    canonical,
    delta_rs_rows,
    deltatx_rows,
    versions,
)

NAMES = [f.name for f in FEATURES]


def _assert_uses_feature(feature: Feature, path: str) -> None:
    snapshot = DeltaLog.for_table(path).snapshot()
    if feature.writer_feature is not None:
        assert feature.writer_feature in writer_features(snapshot.protocol)
    if feature.property_key is not None:
        assert feature.property_key in snapshot.metadata.configuration
    assert len(versions(path)) >= 3, "a conformance table has several versions"


@pytest.fixture(scope="module")
def ours(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """deltatx's table for each feature, built once for every reader of this module."""
    built: dict[str, str] = {}
    root = tmp_path_factory.mktemp("deltatx-conformance")

    class Tables(dict[str, str]):
        def __missing__(self, name: str) -> str:
            build = BY_NAME[name].deltatx
            assert not isinstance(build, str)
            path = str(root / name)
            build(spark, path)
            self[name] = path
            return path

    yield Tables(built)


@pytest.mark.parametrize("name", NAMES)
def test_deltatx_reads_every_version_delta_rs_wrote(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    feature = BY_NAME[name]
    if isinstance(feature.delta_rs, str):
        pytest.skip(feature.delta_rs)
    path = str(tmp_path / name)
    feature.delta_rs(path)
    _assert_uses_feature(feature, path)
    for version in versions(path):
        assert deltatx_rows(spark, path, version) == delta_rs_rows(path, version), version


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("name", NAMES)
def test_delta_rs_reads_every_version_deltatx_wrote(
    spark: SparkSession, ours: dict[str, str], name: str
) -> None:
    feature = BY_NAME[name]
    if isinstance(feature.deltatx, str):
        pytest.skip(feature.deltatx)
    path = ours[name]
    _assert_uses_feature(feature, path)
    for version in versions(path):
        assert delta_rs_rows(path, version) == deltatx_rows(spark, path, version), version


@pytest.fixture(scope="module")
def duckdb_extensions(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A private extension directory, so the tests never write under the user's home."""
    return str(tmp_path_factory.mktemp("duckdb-extensions"))


def _duckdb_with_delta(extension_directory: str) -> Any:
    """A DuckDB connection with the delta extension loaded, or a skip saying why not.

    The extension comes from the ``duckdb-extension-delta`` wheel (a dev dependency) when it
    is installed; otherwise DuckDB would download it on first use, which fails offline.
    """
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    con = duckdb.connect(config={"extension_directory": extension_directory})
    try:
        from duckdb_extensions import import_extension

        import_extension("delta", con=con)
    except ImportError:
        try:
            con.execute("LOAD delta")
        except Exception as exc:
            pytest.skip(
                f"DuckDB's delta extension does not load offline ({str(exc).splitlines()[0]})"
            )
    return con


@pytest.mark.parametrize("name", NAMES)
def test_duckdb_reads_what_deltatx_wrote(
    spark: SparkSession, ours: dict[str, str], name: str, duckdb_extensions: str
) -> None:
    feature = BY_NAME[name]
    if isinstance(feature.deltatx, str):
        pytest.skip(feature.deltatx)
    con = _duckdb_with_delta(duckdb_extensions)
    path = ours[name]
    got = con.execute(f"SELECT * FROM delta_scan('{path}')").fetch_arrow_table().to_pylist()
    latest = versions(path)[-1]
    assert canonical(got) == deltatx_rows(spark, path, latest)
