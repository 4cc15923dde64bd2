"""Marks tests by folder so `-m` selections and reports stay readable."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath)
        for folder in ("spark", "interop", "stress", "peer"):
            if f"/tests/{folder}/" in path:
                item.add_marker(getattr(pytest.mark, folder))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every suite that needs Spark (imported lazily)."""
    from deltatx.session import spark_session

    session = spark_session()
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A table root that does not exist yet (writers create it), unique to the test."""
    return tmp_path / "table"


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Runs the `deltatx` command in-process: ``run_cli(*args) -> (exit code, stdout, stderr)``."""
    from deltatx import cli

    def run(*args: str) -> tuple[int, str, str]:
        old = sys.argv
        sys.argv = ["deltatx", *args]
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            sys.argv = old
        out, err = capsys.readouterr()
        return code, out, err

    return run
