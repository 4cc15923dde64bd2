"""Case 13: commits on S3 (an S3 API server on loopback), deltatx beside delta-rs.

Both engines commit one ``add`` at a time to their own table in the same bucket of the same
server: deltatx with its conditional PUT (``If-None-Match: *``), delta-rs with its own
conditional put (``AWS_CONDITIONAL_PUT=etag``). Latency is one commit on an up-to-date table;
throughput is commits per second of one writer committing back to back (snapshot refresh
included, as a writer pays it).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks import synth
from benchmarks.harness import Figure, Row, Stats
from deltatx.kernel.actions import Metadata
from deltatx.kernel.features import DEFAULT_PROTOCOL
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.version import __version__ as DELTATX_VERSION

APPEND = Operation(OperationName.WRITE, {"mode": "Append"})
CASE = "14 commit on S3"


@dataclass(frozen=True)
class S3Sizes:
    """How many commits each engine makes."""

    commits: int


QUICK = S3Sizes(commits=20)
FULL = S3Sizes(commits=100)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _create(table: str) -> None:
    log = DeltaLog.for_table(table)
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()), schema_string=synth.SCHEMA_STRING, partition_columns=("part",)
        )
    )
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    txn.commit()


def _deltatx(table: str, commits: int) -> tuple[list[float], float]:
    log = DeltaLog.for_table(table)
    snapshot = log.snapshot()
    samples: list[float] = []
    started = time.perf_counter()
    for i in range(commits):
        snapshot = log.update(snapshot)
        t0 = time.perf_counter()
        txn = OptimisticTransaction(log, snapshot)
        txn.add_files(synth.adds(1, offset=i, prefix="dx"))
        txn.record_operation(APPEND, {})
        txn.commit()
        samples.append(time.perf_counter() - t0)
    return samples, commits / (time.perf_counter() - started)


def _delta_rs(table: str, commits: int, options: dict[str, str]) -> tuple[list[float], float]:
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    dt = DeltaTable(table, storage_options=options)
    schema = dt.schema()
    samples: list[float] = []
    started = time.perf_counter()
    for i in range(commits):
        adds = [
            AddAction(
                a.path, a.size, dict(a.partition_values), a.modification_time, True, a.stats or ""
            )
            for a in synth.adds(1, offset=i, prefix="rs")
        ]
        dt.update_incremental()
        t0 = time.perf_counter()
        dt.create_write_transaction(adds, "append", schema, ["part"])
        samples.append(time.perf_counter() - t0)
    return samples, commits / (time.perf_counter() - started)


def run_all(sizes: S3Sizes, log: Callable[[str], None]) -> list[Row]:
    """Starts moto's S3 server on loopback, runs both engines, stops the server."""
    from deltalake import __version__ as rs_version
    from moto.server import ThreadedMotoServer

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench-secret",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        from deltatx.storage.s3 import shared_client_and_filesystem

        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        shared_client_and_filesystem()[0].create_bucket(Bucket=bucket)
        ours, theirs = f"s3://{bucket}/deltatx", f"s3://{bucket}/delta-rs"
        _create(ours)
        _create(theirs)
        log(f"case 14: {sizes.commits} commits on S3 (moto on loopback), deltatx")
        dx_samples, dx_rate = _deltatx(ours, sizes.commits)
        log("case 14: delta-rs")
        options: dict[str, Any] = {**env, "AWS_ALLOW_HTTP": "true", "AWS_CONDITIONAL_PUT": "etag"}
        rs_samples, rs_rate = _delta_rs(theirs, sizes.commits, options)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    size = f"{sizes.commits} commits of 1 add, one writer, moto S3 server on loopback"
    rows = [
        Row(
            case=CASE,
            name="commit latency on S3 (conditional PUT)",
            size=size,
            unit="s",
            deltatx=Figure("deltatx", DELTATX_VERSION, Stats.of(dx_samples)),
            peer=Figure("delta-rs", str(rs_version), Stats.of(rs_samples)),
            target="report only",
        ),
        Row(
            case=CASE,
            name="commits per second on S3, back to back",
            size=size,
            unit="commits/s",
            higher_is_better=True,
            deltatx=Figure("deltatx", DELTATX_VERSION, Stats.of([dx_rate])),
            peer=Figure("delta-rs", str(rs_version), Stats.of([rs_rate])),
            target="report only",
        ),
    ]
    return rows
