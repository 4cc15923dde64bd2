"""Marks tests by folder so `-m` selections and reports stay readable."""

from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Tests never assert on time: a property's examples may run slowly on a loaded machine (CI
# shares its cores), so Hypothesis's per-example deadline is off for every test.
settings.register_profile("deltatx", deadline=None)
settings.load_profile("deltatx")

# Every JVM the tests start (each worker's session, the peer's, those of child processes, which
# inherit this) lives minutes and runs small jobs, two pytest processes sharing two cores: the
# JIT's optimizing compiler and the parallel collector's threads cost them more CPU than they
# save. On test_dml.py and test_datasource.py in two processes, these settings took the run
# from 239 s to 182 s and its CPU from 453 s to 327 s. Spark reads SPARK_SUBMIT_OPTS when it
# launches a JVM; a developer's own setting is kept.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# The tests' Spark runs a few rows per query: generating and compiling code for each plan,
# and re-planning it adaptively, cost more there than they save, and change no result. The
# demo, the benchmarks and users keep Spark's defaults.
SMALL_DATA_SPARK = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The S3 tests talk to an S3 API server on loopback. Its address and credentials are set here,
# before any Spark session or writer process starts, so that the executors' Python workers and
# child processes inherit them (the AWS variables are how every process finds its store).
S3_PORT = _free_port()
os.environ.update(
    {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
        "AWS_ACCESS_KEY_ID": "deltatx-test",
        "AWS_SECRET_ACCESS_KEY": "deltatx-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
)


# `make stress` and `make peer` run every case of the sampled tables below; `make test`, whose
# whole run must stay under 30 minutes on two cores, runs a share of each.
FULL_SUITE = bool(os.environ.get("DELTATX_STRESS_FULL") or os.environ.get("DELTATX_PEER_FULL"))


def sampled(cases: list[pytest.Item], every: int, offset: int) -> list[pytest.Item]:
    """One case in ``every`` of a parametrized test, on a diagonal of its parameter grid.

    Taking every ``every``-th case in collection order would keep a single value of the
    fastest-varying parameter; shifting the pick by one after each run of ``every`` cases
    keeps each of its values in turn. ``offset`` picks another diagonal, so that two tests
    over one grid cover different cases.
    """
    return [c for i, c in enumerate(cases) if (i + i // every + offset) % every == 0]


# Test files whose tests share a process with a JVM of its own, started once per pytest
# worker: under `--dist loadfile` each group goes to one worker, which then starts that
# process once instead of each worker starting its own (a JVM costs about 17 CPU-seconds to
# start, on cores the Spark tests already keep busy).
SHARED_PROCESS_GROUPS = {
    "delta_spark": ("tests/peer/",),
    "writer_servers": (
        "tests/stress/test_concurrent_writers.py",
        "tests/stress/test_serializability.py",
    ),
}


def _worker_unit(nodeid: str) -> str:
    """What one worker runs whole: the test's file, or the shared-process group it is in."""
    path = nodeid.split("::", 1)[0]
    for group, prefixes in SHARED_PROCESS_GROUPS.items():
        if path.startswith(prefixes):
            return group
    return path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with each of :data:`SHARED_PROCESS_GROUPS` one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedProcessScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _worker_unit(nodeid)

    return SharedProcessScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath)
        for folder in ("spark", "interop", "stress", "peer"):
            if f"/tests/{folder}/" in path:
                item.add_marker(getattr(pytest.mark, folder))
        used = getattr(item, "fixturenames", ())
        for fixture in SHARED_PROCESS_GROUPS:
            if fixture in used and _worker_unit(item.nodeid) != fixture:
                raise pytest.UsageError(
                    f"{item.nodeid} uses the {fixture} fixture: add its file to "
                    f"SHARED_PROCESS_GROUPS[{fixture!r}] in tests/conftest.py"
                )
    if FULL_SUITE:
        return
    groups: dict[tuple[str, str], list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("sample") is not None:
            groups.setdefault((item.nodeid.split("::")[0], item.originalname), []).append(item)
    dropped: set[pytest.Item] = set()
    for cases in groups.values():
        mark = cases[0].get_closest_marker("sample")
        assert mark is not None
        kept = sampled(cases, mark.kwargs.get("every", 2), mark.kwargs.get("offset", 0))
        dropped.update(c for c in cases if c not in kept)
    if dropped:
        config.hook.pytest_deselected(items=[i for i in items if i in dropped])
        items[:] = [i for i in items if i not in dropped]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every suite that needs Spark (imported lazily)."""
    from deltatx.session import spark_session

    session = spark_session(config=SMALL_DATA_SPARK)
    yield session
    session.stop()


@pytest.fixture
def reader_extension(spark: Any) -> Iterator[Callable[[bool], None]]:
    """Turns deltatx's reader extension on or off for the test: ``reader_extension(False)``.

    Off, scans apply deletion vectors with Spark SQL expressions, as where the jar is absent.
    """
    from deltatx.spark.reader_extension import ENABLED_SETTING

    def use(enabled: bool) -> None:
        spark.conf.set(ENABLED_SETTING, str(enabled).lower())

    try:
        yield use
    finally:
        spark.conf.unset(ENABLED_SETTING)


@pytest.fixture
def without_reader_extension(reader_extension: Callable[[bool], None]) -> None:
    """Scans apply deletion vectors with Spark SQL expressions, as where the jar is absent."""
    reader_extension(False)


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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3 API server on loopback for the whole session; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=S3_PORT, verbose=False)
    server.start()
    try:
        yield os.environ["AWS_ENDPOINT_URL"]
    finally:
        server.stop()


@pytest.fixture
def s3_table(s3_server: str) -> str:
    """A table root on a fresh bucket of the loopback S3 server (``s3://bucket/table``)."""
    from deltatx.storage.s3 import shared_client_and_filesystem

    bucket = f"t-{uuid.uuid4().hex[:20]}"
    shared_client_and_filesystem()[0].create_bucket(Bucket=bucket)
    return f"s3://{bucket}/table"
