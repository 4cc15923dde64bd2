"""Helpers shared by the log-layer unit tests: build tables commit by commit."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from deltatx.kernel.actions import (
    Action,
    AddFile,
    CommitInfo,
    Metadata,
    ProtocolAction,
    RemoveFile,
)
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import commit_name
from deltatx.storage.log_store import LogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)
PROTOCOL = ProtocolAction(min_reader_version=1, min_writer_version=2)
METADATA = Metadata(id="tbl-1", schema_string=SCHEMA, partition_columns=("part",))


def add(path: str, part: str = "a", size: int = 100, **kw: object) -> AddFile:
    return AddFile(
        path=path,
        partition_values={"part": part},
        size=size,
        modification_time=1_000,
        data_change=True,
        **kw,  # type: ignore[arg-type]
    )


def remove(path: str, ts: int = 2_000, **kw: object) -> RemoveFile:
    return RemoveFile(path=path, deletion_timestamp=ts, data_change=True, **kw)  # type: ignore[arg-type]


def info(ts: int, op: str = "WRITE") -> CommitInfo:
    return CommitInfo(timestamp=ts, operation=op)


def write_commit(store: LogStore, table: str, version: int, actions: Sequence[Action]) -> None:
    store.write(f"{table}/_delta_log/{commit_name(version)}", serialize_commit(actions))


def create(store: LogStore, table: str, *extra: Action, ts: int = 1_000) -> None:
    write_commit(store, table, 0, [info(ts, "CREATE TABLE"), PROTOCOL, METADATA, *extra])


def snapshot_dir(path: str) -> dict[str, bytes]:
    """Every file under ``path`` with its content (to prove a failure changed nothing)."""
    out: dict[str, bytes] = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out
