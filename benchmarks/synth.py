"""Synthetic tables for the metadata cases: commit files written directly, no Spark.

Every commit is encoded with :mod:`deltatx.kernel.codec`, so the log is exactly what deltatx
itself would write; the data files the ``add`` actions name do not exist (no metadata case
reads data). Files are written with plain ``open`` because building a 100,000-commit log
through the durable write-if-absent primitive would take minutes and measure nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from deltatx.kernel.actions import Action, AddFile, CommitInfo, Metadata, ProtocolAction
from deltatx.kernel.codec import serialize_action, serialize_commit
from deltatx.kernel.log_paths import commit_name

SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "double", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)
PARTITIONS = 10
# The same interval on every table and for every engine, so checkpoint hooks cost both the same.
CHECKPOINT_INTERVAL = 100
PROTOCOL = ProtocolAction(min_reader_version=1, min_writer_version=2)
METADATA = Metadata(
    id="bench-0000-0000-0000-000000000000",
    schema_string=SCHEMA_STRING,
    partition_columns=("part",),
    configuration={"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)},
    created_time=1_700_000_000_000,
)
BASE_TS = 1_700_000_000_000


def stats_json(i: int, rows: int = 1000) -> str:
    """Min/max/null-count statistics of file ``i``: ids ``[i*rows, (i+1)*rows)``."""
    lo = i * rows
    return json.dumps(
        {
            "numRecords": rows,
            "minValues": {"id": lo, "v": 0.0},
            "maxValues": {"id": lo + rows - 1, "v": 1.0},
            "nullCount": {"id": 0, "v": 0},
        },
        separators=(",", ":"),
    )


def add_file(i: int, *, prefix: str = "f") -> AddFile:
    """The ``add`` of synthetic data file ``i`` (partition ``p{i % 10}``)."""
    part = f"p{i % PARTITIONS}"
    return AddFile(
        path=f"part={part}/{prefix}-{i:09d}.parquet",
        partition_values={"part": part},
        size=10_000 + i % 997,
        modification_time=BASE_TS + i,
        data_change=True,
        stats=stats_json(i),
    )


def append_info(version: int) -> CommitInfo:
    """The ``commitInfo`` of a synthetic blind append."""
    return CommitInfo(
        timestamp=BASE_TS + version * 1000,
        operation="WRITE",
        operation_parameters={"mode": "Append", "partitionBy": "[]"},
        read_version=version - 1 if version else None,
        isolation_level="WriteSerializable",
        is_blind_append=True,
        engine_info="deltatx-bench",
    )


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def log_dir(table: str) -> str:
    """The ``_delta_log`` directory of ``table`` (created)."""
    path = os.path.join(table, "_delta_log")
    os.makedirs(path, exist_ok=True)
    return path


def write_commit(table: str, version: int, actions: Sequence[Action]) -> None:
    """Writes ``<version>.json`` with ``actions`` (overwrites)."""
    _write(os.path.join(log_dir(table), commit_name(version)), serialize_commit(actions))


def build_table(table: str, commits: int, *, files_per_commit: int = 1) -> int:
    """Creates a table of ``commits`` versions (0 .. commits-1); each adds new files.

    Version 0 sets protocol and metadata; every version (0 included) adds
    ``files_per_commit`` files, so the table ends with ``commits * files_per_commit`` live
    files. Returns the latest version.
    """
    directory = log_dir(table)
    header = serialize_commit([append_info(0), PROTOCOL, METADATA])
    n = 0
    for version in range(commits):
        lines = [serialize_action(append_info(version))]
        for _ in range(files_per_commit):
            lines.append(serialize_action(add_file(n)))
            n += 1
        body = ("\n".join(lines) + "\n").encode("utf-8")
        if version == 0:
            # commitInfo first, then protocol and metaData, then the adds.
            body = header + body.split(b"\n", 1)[1]
        _write(os.path.join(directory, commit_name(version)), body)
    return commits - 1


def append_commits(table: str, start_version: int, count: int, *, first_file: int) -> int:
    """Appends ``count`` one-file blind appends from ``start_version``; returns the last."""
    for k in range(count):
        version = start_version + k
        write_commit(table, version, [append_info(version), add_file(first_file + k, prefix="g")])
    return start_version + count - 1


def adds(count: int, *, offset: int, prefix: str) -> list[AddFile]:
    """``count`` fresh synthetic ``add`` actions."""
    return [add_file(offset + i, prefix=prefix) for i in range(count)]


def remove_checkpoints(table: str) -> None:
    """Deletes every checkpoint and ``_last_checkpoint`` (to time a checkpoint from scratch)."""
    directory = log_dir(table)
    for name in os.listdir(directory):
        if ".checkpoint." in name or name == "_last_checkpoint":
            os.unlink(os.path.join(directory, name))
