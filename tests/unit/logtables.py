"""Helpers for log-level tests: tables made of commits only, no data files, no Spark."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from deltatx.kernel.actions import AddFile, Metadata
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Expression, Literal
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
            {"name": "value", "type": "long", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)


def add(
    path: str,
    part: str | None = None,
    *,
    lo: int = 0,
    hi: int = 10,
    rows: int = 10,
    data_change: bool = True,
) -> AddFile:
    stats = {
        "numRecords": rows,
        "minValues": {"id": lo, "value": lo},
        "maxValues": {"id": hi, "value": hi},
        "nullCount": {"id": 0, "value": 0},
    }
    return AddFile(
        path=path,
        partition_values={} if part is None else {"part": part},
        size=100,
        modification_time=int(time.time() * 1000),
        data_change=data_change,
        stats=json.dumps(stats),
    )


def eq(column: str, value: Any) -> Expression:
    return Comparison(ComparisonOp.EQ, Column(column), Literal(value))


def create_table(
    store: LogStore,
    root: str,
    *,
    partitioned: bool = True,
    configuration: Mapping[str, str] | None = None,
) -> DeltaLog:
    log = DeltaLog.for_table(root, store=store)
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(protocol_for_configuration(configuration or {}, DEFAULT_PROTOCOL))
    txn.update_metadata(
        Metadata(
            id="11111111-2222-3333-4444-555555555555",
            schema_string=SCHEMA,
            partition_columns=("part",) if partitioned else (),
            configuration=dict(configuration or {}),
            created_time=int(time.time() * 1000),
        )
    )
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    txn.commit()
    return log


def append(log: DeltaLog, *files: AddFile) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files(list(files))
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    return txn.commit()


def begin(log: DeltaLog) -> OptimisticTransaction:
    return OptimisticTransaction(log, log.snapshot())
