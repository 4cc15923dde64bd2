"""Classic (V1) Parquet checkpoints and the ``_last_checkpoint`` pointer.

A checkpoint holds one row per action of the reconciled state, one nullable struct column per
action type, with the protocol's camelCase field names, so that delta-spark and delta-rs read
what deltatx writes and the other way round. Reading selects only the leaves the state needs,
so optional extras such as ``add.stats_parsed`` cost nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import DomainMetadata, Metadata, ProtocolAction, SetTransaction
from deltatx.kernel.codec import action_from_json_obj, action_to_json_obj
from deltatx.kernel.log_paths import LAST_CHECKPOINT, checkpoint_name
from deltatx.kernel.log_segment import CheckpointHint, parse_checkpoint_hint
from deltatx.kernel.table_configuration import TableConfiguration
from deltatx.log import _state
from deltatx.storage.faults import fault_point, fault_scope
from deltatx.storage.log_store import LogStore

TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _state.STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _state.STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
DOMAIN_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
_SMALL_COLUMNS = {
    "protocol": PROTOCOL_TYPE,
    "metaData": METADATA_TYPE,
    "txn": TXN_TYPE,
    "domainMetadata": DOMAIN_TYPE,
}


@dataclass(frozen=True, slots=True)
class CheckpointState:
    """The reconciled state a checkpoint holds, in the log layer's columnar form."""

    files: pa.Table
    tombstones: pa.Table
    protocol: ProtocolAction | None
    metadata: Metadata | None
    app_transactions: dict[str, SetTransaction]
    domain_metadata: dict[str, DomainMetadata]


def read_last_checkpoint(store: LogStore, log_path: str) -> CheckpointHint | None:
    """The ``_last_checkpoint`` hint, or None when it is absent or unreadable."""
    try:
        data = store.read(f"{log_path}/{LAST_CHECKPOINT}")
    except FileNotFoundError:
        return None
    return parse_checkpoint_hint(data)


def _strip_nulls(obj: dict[str, Any]) -> dict[str, Any]:
    # Parquet rows carry every schema field; the codec treats JSON-absent and null alike, but
    # unknown null fields would otherwise end up in ``extra`` and be written back.
    return {
        k: _strip_nulls(v) if isinstance(v, dict) else v for k, v in obj.items() if v is not None
    }


def _leaves(schema: pa.Schema, column: str, wanted: Sequence[str] | None) -> list[str]:
    index = schema.get_field_index(column)
    if index < 0:
        return []
    if wanted is None:
        return [column]
    struct_type = schema.field(index).type
    names = {struct_type.field(i).name for i in range(struct_type.num_fields)}
    return [f"{column}.{w}" for w in wanted if w in names]


_ADD_LEAVES = _state.ADD_WIRE_NAMES
_REMOVE_LEAVES = _state.REMOVE_WIRE_NAMES


def read_checkpoint(store: LogStore, log_path: str, names: Sequence[str]) -> CheckpointState:
    """Reads a classic or multi-part checkpoint (all its parts, in order).

    Raises:
        InvalidTableError: A part is missing or is not a readable checkpoint; the message
            names the file.
    """
    files: list[pa.Table] = []
    tombstones: list[pa.Table] = []
    small: dict[str, list[dict[str, Any]]] = {k: [] for k in _SMALL_COLUMNS}
    for name in names:
        path = f"{log_path}/{name}"
        try:
            pf = pq.ParquetFile(pa.BufferReader(store.read(path)))
            schema = pf.schema_arrow
            columns = (
                _leaves(schema, "add", _ADD_LEAVES)
                + _leaves(schema, "remove", _REMOVE_LEAVES)
                + [c for k in _SMALL_COLUMNS for c in _leaves(schema, k, None)]
            )
            # Without reader threads: pyarrow's pool can abort the interpreter at exit
            # (apache/arrow#34314), and a checkpoint is decoded fast enough without it.
            table = pf.read(columns=columns, use_threads=False)
        except FileNotFoundError:
            raise InvalidTableError(f"{path}: checkpoint file is missing") from None
        except (pa.ArrowException, OSError) as exc:
            raise InvalidTableError(f"{path}: not a readable checkpoint ({exc})") from None
        try:
            if "add" in table.column_names:
                col = table.column("add")
                files.append(_state.files_from_wire(col.filter(pc.is_valid(col))))
            if "remove" in table.column_names:
                col = table.column("remove")
                tombstones.append(_state.tombstones_from_wire(col.filter(pc.is_valid(col))))
            for key in _SMALL_COLUMNS:
                if key in table.column_names:
                    col = table.column(key)
                    rows = col.filter(pc.is_valid(col)).to_pylist(maps_as_pydicts="strict")
                    small[key].extend(_strip_nulls(r) for r in rows)
        except pa.ArrowException as exc:
            raise InvalidTableError(f"{path}: unexpected checkpoint column type ({exc})") from None
    where = f"{log_path}/{names[0]}" if names else log_path
    live = pa.concat_tables(files) if files else _state.empty_files()
    if (bad := _state.negative_size(live)) is not None:
        raise InvalidTableError(
            f"{where}: add {live.column('path')[bad].as_py()!r} has a negative size "
            f"({live.column('size')[bad].as_py()})"
        )
    protocol = metadata = None
    txns: dict[str, SetTransaction] = {}
    domains: dict[str, DomainMetadata] = {}
    for key, rows in small.items():
        for row in rows:
            action = action_from_json_obj({key: row}, where=where)
            if isinstance(action, ProtocolAction):
                protocol = action
            elif isinstance(action, Metadata):
                metadata = action
            elif isinstance(action, SetTransaction):
                txns[action.app_id] = action
            elif isinstance(action, DomainMetadata) and not action.removed:
                domains[action.domain] = action
    return CheckpointState(
        files=live,
        tombstones=pa.concat_tables(tombstones) if tombstones else _state.empty_tombstones(),
        protocol=protocol,
        metadata=metadata,
        app_transactions=txns,
        domain_metadata=domains,
    )


def _column(wire_type: pa.DataType, before: int, values: pa.Array | None, after: int) -> pa.Array:
    parts = []
    if before:
        parts.append(pa.nulls(before, type=wire_type))
    if values is not None and len(values):
        parts.append(values)
    if after:
        parts.append(pa.nulls(after, type=wire_type))
    if not parts:
        return pa.array([], type=wire_type)
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def checkpoint_table(
    *,
    files: pa.Table,
    tombstones: pa.Table,
    protocol: ProtocolAction,
    metadata: Metadata,
    app_transactions: Mapping[str, SetTransaction],
    domain_metadata: Mapping[str, DomainMetadata],
) -> pa.Table:
    """The checkpoint rows for a state: protocol, metaData, txn, domainMetadata, add, remove."""
    small: list[tuple[str, list[dict[str, Any]]]] = [
        ("protocol", [action_to_json_obj(protocol)["protocol"]]),
        ("metaData", [action_to_json_obj(metadata)["metaData"]]),
        ("txn", [action_to_json_obj(t)["txn"] for t in app_transactions.values()]),
        (
            "domainMetadata",
            [action_to_json_obj(d)["domainMetadata"] for d in domain_metadata.values()],
        ),
    ]
    adds = _state.files_to_checkpoint(files)
    removes = _state.tombstones_to_checkpoint(tombstones)
    total = sum(len(rows) for _, rows in small) + len(adds) + len(removes)
    columns: dict[str, pa.Array] = {}
    offset = 0
    for key, rows in small:
        values = pa.array(rows, type=_SMALL_COLUMNS[key]) if rows else None
        columns[key] = _column(_SMALL_COLUMNS[key], offset, values, total - offset - len(rows))
        offset += len(rows)
    columns["add"] = _column(adds.type, offset, adds, total - offset - len(adds))
    offset += len(adds)
    columns["remove"] = _column(removes.type, offset, removes, total - offset - len(removes))
    order = ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    return pa.table({k: columns[k] for k in order})


def write_checkpoint(
    store: LogStore,
    log_path: str,
    *,
    version: int,
    files: pa.Table,
    tombstones: pa.Table,
    protocol: ProtocolAction,
    metadata: Metadata,
    app_transactions: Mapping[str, SetTransaction],
    domain_metadata: Mapping[str, DomainMetadata],
) -> CheckpointHint:
    """Writes ``<version>.checkpoint.parquet``, then points ``_last_checkpoint`` at it.

    The store writes whole files atomically (temporary name, then rename), so no reader sees a
    half-written checkpoint; two writers of the same version each publish a complete
    checkpoint of the same state, so whichever rename lands last is as good as the other. A
    crash between the two writes leaves ``_last_checkpoint`` pointing at an older checkpoint,
    which is only a shortcut for listing. On a store without atomic whole-file writes a torn
    checkpoint can appear; :meth:`DeltaLog.snapshot` then falls back to an older checkpoint or
    to the commits.

    Returns:
        The hint that was written to ``_last_checkpoint``.

    Raises:
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support (a
            checkpoint written without it would drop what the feature means); nothing is written.
    """
    TableConfiguration.of(protocol, metadata).check_writable()
    table = checkpoint_table(
        files=files,
        tombstones=tombstones,
        protocol=protocol,
        metadata=metadata,
        app_transactions=app_transactions,
        domain_metadata=domain_metadata,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue().to_pybytes()
    with fault_scope("checkpoint"):
        store.write(f"{log_path}/{checkpoint_name(version)}", data, overwrite=True)
    fault_point("checkpoint.last_checkpoint")
    hint = CheckpointHint(
        version=version,
        size=table.num_rows,
        size_in_bytes=len(data),
        num_of_add_files=files.num_rows,
    )
    pointer = {
        "version": hint.version,
        "size": hint.size,
        "sizeInBytes": hint.size_in_bytes,
        "numOfAddFiles": hint.num_of_add_files,
    }
    with fault_scope("last_checkpoint"):
        store.write(
            f"{log_path}/{LAST_CHECKPOINT}",
            json.dumps(pointer, separators=(",", ":")).encode("utf-8"),
            overwrite=True,
        )
    return hint
