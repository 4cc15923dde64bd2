"""One local SparkSession for the whole Spark suite, and a fresh table directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deltatx.spark.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session()
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A table root that does not exist yet (writers create it), unique to the test."""
    return tmp_path / "table"
