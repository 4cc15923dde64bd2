"""The delta-spark peer: one driver process for the whole peer suite, or a one-line skip."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .engine import DeltaSpark, missing_reason

# One core, so that a statement can be held between reading and committing (engine.held);
# otherwise the settings of deltatx's own local session, the tests' small-data ones included.
PEER_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.driver.memory": "1g",
    "spark.log.level": "WARN",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "/tests/peer/" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def delta_spark() -> Iterator[DeltaSpark]:
    """delta-spark 4.4 on Spark 4.2 in its own process (its log: $TMPDIR/deltatx-peer.log)."""
    log = Path(os.environ.get("DELTATX_PEER_LOG", Path(tempfile.gettempdir()) / "deltatx-peer.log"))
    peer = DeltaSpark(master="local[1]", conf=PEER_CONF, log=log)
    yield peer
    peer.close()
