"""Marks tests by folder so `-m` selections and reports stay readable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath)
        for folder in ("spark", "interop", "stress"):
            if f"/tests/{folder}/" in path:
                item.add_marker(getattr(pytest.mark, folder))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every suite that needs Spark (imported lazily)."""
    from deltatx.spark.session import spark_session

    session = spark_session()
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A table root that does not exist yet (writers create it), unique to the test."""
    return tmp_path / "table"
