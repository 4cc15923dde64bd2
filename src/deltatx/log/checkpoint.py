"""Checkpoints (classic, multi-part and v2) and the ``_last_checkpoint`` pointer.

A Parquet checkpoint holds one row per action of the reconciled state, one nullable struct
column per action type, with the protocol's camelCase field names, so that delta-spark and
delta-rs read what deltatx writes and the other way round. Reading selects only the leaves the
state needs, so optional extras such as ``add.stats_parsed`` cost nothing.

A v2 checkpoint (``n.checkpoint.<uuid>.parquet|json``) adds a ``checkpointMetadata`` action and
may keep its file actions in ``sidecar`` files under ``_delta_log/_sidecars``. deltatx reads
every form and writes single-file v2 checkpoints, with the file actions inline, for tables with
the ``v2Checkpoint`` feature; other tables get classic checkpoints, which every reader knows.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import DomainMetadata, Metadata, ProtocolAction, SetTransaction
from deltatx.kernel.codec import action_from_json_obj, action_to_json_obj
from deltatx.kernel.log_paths import (
    LAST_CHECKPOINT,
    SIDECAR_DIR,
    checkpoint_name,
    v2_checkpoint_name,
)
from deltatx.kernel.log_segment import CheckpointHint, parse_checkpoint_hint
from deltatx.kernel.table_configuration import TableConfiguration
from deltatx.log import _state, file_actions
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
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _state.STR_MAP)])
SIDECAR_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", _state.STR_MAP),
    ]
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


@dataclass(slots=True)
class _Parts:
    """What the files of one checkpoint hold, gathered before the state is assembled."""

    files: list[pa.Table] = field(default_factory=list)
    tombstones: list[pa.Table] = field(default_factory=list)
    small: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {k: [] for k in _SMALL_COLUMNS}
    )
    sidecars: list[str] = field(default_factory=list)


def _read_parquet(store: LogStore, path: str, parts: _Parts, *, sidecar: bool) -> None:
    try:
        pf = pq.ParquetFile(pa.BufferReader(store.read(path)))
        schema = pf.schema_arrow
        columns = _leaves(schema, "add", _ADD_LEAVES) + _leaves(schema, "remove", _REMOVE_LEAVES)
        if not sidecar:
            columns += [c for k in _SMALL_COLUMNS for c in _leaves(schema, k, None)]
            columns += _leaves(schema, "sidecar", ["path"])
        # Without reader threads: pyarrow's pool can abort the interpreter at exit
        # (apache/arrow#34314), and a checkpoint is decoded fast enough without it.
        table = pf.read(columns=columns, use_threads=False)
    except FileNotFoundError:
        what = "sidecar" if sidecar else "checkpoint"
        raise InvalidTableError(f"{path}: {what} file is missing") from None
    except (pa.ArrowException, OSError) as exc:
        what = "sidecar" if sidecar else "checkpoint"
        raise InvalidTableError(f"{path}: not a readable {what} ({exc})") from None
    try:
        if "add" in table.column_names:
            col = table.column("add")
            parts.files.append(_state.files_from_wire(col.filter(pc.is_valid(col))))
        if "remove" in table.column_names:
            col = table.column("remove")
            parts.tombstones.append(_state.tombstones_from_wire(col.filter(pc.is_valid(col))))
        for key in _SMALL_COLUMNS:
            if key in table.column_names:
                col = table.column(key)
                rows = col.filter(pc.is_valid(col)).to_pylist(maps_as_pydicts="strict")
                parts.small[key].extend(_strip_nulls(r) for r in rows)
        if "sidecar" in table.column_names:
            col = table.column("sidecar")
            for row in col.filter(pc.is_valid(col)).to_pylist():
                if not isinstance(row.get("path"), str):
                    raise InvalidTableError(f"{path}: a sidecar action has no path")
                parts.sidecars.append(row["path"])
    except pa.ArrowException as exc:
        raise InvalidTableError(f"{path}: unexpected checkpoint column type ({exc})") from None


def _read_json(store: LogStore, path: str, parts: _Parts) -> None:
    try:
        data = store.read(path)
    except FileNotFoundError:
        raise InvalidTableError(f"{path}: checkpoint file is missing") from None
    batch = file_actions.FileActionBatch()
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip() or batch.take_line(raw, path, lineno):
            continue
        where = f"{path} line {lineno}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InvalidTableError(f"{where}: not a valid JSON action") from None
        if type(obj) is not dict or len(obj) != 1:
            raise InvalidTableError(f"{where}: an action must be a JSON object with one key")
        ((kind, body),) = obj.items()
        if kind in ("add", "remove"):
            if type(body) is not dict or not batch.take_object(kind, body, path, lineno):
                action_from_json_obj(obj, where=where)  # raises the precise error
                raise InvalidTableError(f"{where}: malformed {kind} action")
        elif kind == "sidecar":
            if type(body) is not dict or not isinstance(body.get("path"), str):
                raise InvalidTableError(f"{where}: a sidecar action has no path")
            parts.sidecars.append(body["path"])
        elif kind in parts.small:
            parts.small[kind].append(body)
    parts.files.append(batch.files())
    parts.tombstones.append(batch.tombstones())


def _sidecar_path(log_path: str, where: str, path: str) -> str:
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme or path.startswith("/"):
        if path.startswith("/"):
            return path
        raise InvalidTableError(f"{where}: sidecar {path!r} is on a store deltatx cannot read")
    resolved = posixpath.normpath(f"{log_path}/{SIDECAR_DIR}/{unquote(path)}")
    if not resolved.startswith(f"{log_path}/{SIDECAR_DIR}/"):
        raise InvalidTableError(f"{where}: sidecar {path!r} climbs out of the sidecar directory")
    return resolved


def read_checkpoint(store: LogStore, log_path: str, names: Sequence[str]) -> CheckpointState:
    """Reads a checkpoint: classic, multi-part (all its parts, in order) or v2 with sidecars.

    Raises:
        InvalidTableError: A part or sidecar is missing or is not a readable checkpoint; the
            message names the file.
    """
    parts = _Parts()
    for name in names:
        path = f"{log_path}/{name}"
        if name.endswith(".json"):
            _read_json(store, path, parts)
        else:
            _read_parquet(store, path, parts, sidecar=False)
    where = f"{log_path}/{names[0]}" if names else log_path
    for sidecar in parts.sidecars:
        _read_parquet(store, _sidecar_path(log_path, where, sidecar), parts, sidecar=True)
    live = pa.concat_tables(parts.files) if parts.files else _state.empty_files()
    if (bad := _state.negative_size(live)) is not None:
        raise InvalidTableError(
            f"{where}: add {live.column('path')[bad].as_py()!r} has a negative size "
            f"({live.column('size')[bad].as_py()})"
        )
    protocol = metadata = None
    txns: dict[str, SetTransaction] = {}
    domains: dict[str, DomainMetadata] = {}
    for key, rows in parts.small.items():
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
    tombstones = parts.tombstones
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
    v2_version: int | None = None,
) -> pa.Table:
    """The checkpoint rows for a state: protocol, metaData, txn, domainMetadata, add, remove.

    With ``v2_version`` the rows are those of a v2 checkpoint of that version: one more, the
    ``checkpointMetadata`` action, and an empty ``sidecar`` column (file actions are inline).
    """
    small: list[tuple[str, list[dict[str, Any]]]] = [
        ("protocol", [action_to_json_obj(protocol)["protocol"]]),
        ("metaData", [action_to_json_obj(metadata)["metaData"]]),
        ("txn", [action_to_json_obj(t)["txn"] for t in app_transactions.values()]),
        (
            "domainMetadata",
            [action_to_json_obj(d)["domainMetadata"] for d in domain_metadata.values()],
        ),
    ]
    types = dict(_SMALL_COLUMNS)
    if v2_version is not None:
        small.append(("checkpointMetadata", [{"version": v2_version, "tags": None}]))
        types["checkpointMetadata"] = CHECKPOINT_METADATA_TYPE
    adds = _state.files_to_checkpoint(files)
    removes = _state.tombstones_to_checkpoint(tombstones)
    total = sum(len(rows) for _, rows in small) + len(adds) + len(removes)
    columns: dict[str, pa.Array] = {}
    offset = 0
    for key, rows in small:
        values = pa.array(rows, type=types[key]) if rows else None
        columns[key] = _column(types[key], offset, values, total - offset - len(rows))
        offset += len(rows)
    columns["add"] = _column(adds.type, offset, adds, total - offset - len(adds))
    offset += len(adds)
    columns["remove"] = _column(removes.type, offset, removes, total - offset - len(removes))
    order = ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    if v2_version is not None:
        columns["sidecar"] = pa.nulls(total, type=SIDECAR_TYPE)
        order += ["checkpointMetadata", "sidecar"]
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
    """Writes a checkpoint of ``version``, then points ``_last_checkpoint`` at it.

    The checkpoint is ``<version>.checkpoint.parquet``, or for a table with the
    ``v2Checkpoint`` feature the single-file v2 checkpoint ``<version>.checkpoint.<uuid>.parquet``
    (the protocol requires the ``checkpointMetadata`` action there and forbids multi-part ones).

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
    configuration = TableConfiguration.of(protocol, metadata)
    configuration.check_writable()
    v2 = configuration.v2_checkpoints
    table = checkpoint_table(
        files=files,
        tombstones=tombstones,
        protocol=protocol,
        metadata=metadata,
        app_transactions=app_transactions,
        domain_metadata=domain_metadata,
        v2_version=version if v2 else None,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue().to_pybytes()
    name = v2_checkpoint_name(version, str(uuid.uuid4())) if v2 else checkpoint_name(version)
    with fault_scope("checkpoint"):
        # A v2 name is unique, so there is nothing to overwrite.
        store.write(f"{log_path}/{name}", data, overwrite=not v2)
    fault_point("checkpoint.last_checkpoint")
    hint = CheckpointHint(
        version=version,
        size=table.num_rows,
        size_in_bytes=len(data),
        num_of_add_files=files.num_rows,
    )
    pointer: dict[str, Any] = {
        "version": hint.version,
        "size": hint.size,
        "sizeInBytes": hint.size_in_bytes,
        "numOfAddFiles": hint.num_of_add_files,
    }
    if v2:
        pointer["v2Checkpoint"] = {"path": name, "sizeInBytes": len(data)}
    with fault_scope("last_checkpoint"):
        store.write(
            f"{log_path}/{LAST_CHECKPOINT}",
            json.dumps(pointer, separators=(",", ":")).encode("utf-8"),
            overwrite=True,
        )
    return hint
