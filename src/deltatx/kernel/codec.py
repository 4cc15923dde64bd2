"""Actions to and from the newline-delimited JSON of commit files.

This is the only module that knows the protocol's camelCase wire names. Fields that are absent
or null are omitted on output, as delta-spark does; unknown fields are kept in ``extra`` and
written back after the known ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Format,
    JsonDict,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
    UnknownAction,
)
from deltatx.kernel.plain_adds import add_lines, plain_add, plain_add_line

_SEPARATORS = (",", ":")


class _Fields:
    """Reads typed fields out of a wire object, remembering which keys it consumed."""

    __slots__ = ("_obj", "_seen", "_where")

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise InvalidTableError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        self._obj: JsonDict = obj
        self._seen: set[str] = set()
        self._where = where

    def _get(self, key: str, kinds: tuple[type, ...], required: bool) -> Any:
        self._seen.add(key)
        value = self._obj.get(key)
        if value is None:
            if required:
                raise InvalidTableError(f"{self._where}: missing required field '{key}'")
            return None
        if isinstance(value, bool) and bool not in kinds:
            raise InvalidTableError(f"{self._where}: field '{key}' must not be a boolean")
        if not isinstance(value, kinds):
            names = "/".join(k.__name__ for k in kinds)
            raise InvalidTableError(
                f"{self._where}: field '{key}' must be {names}, got {type(value).__name__}"
            )
        return value

    def text(self, key: str, *, required: bool = False) -> Any:
        return self._get(key, (str,), required)

    def integer(self, key: str, *, required: bool = False) -> Any:
        value = self._get(key, (int,), required)
        # The protocol's integers are Java longs; anything wider cannot be a real value.
        if value is not None and not -(2**63) <= value < 2**63:
            raise InvalidTableError(f"{self._where}: field '{key}' is out of the int64 range")
        return value

    def boolean(self, key: str, *, required: bool = False) -> Any:
        return self._get(key, (bool,), required)

    def mapping(self, key: str, *, required: bool = False) -> Any:
        return self._get(key, (dict,), required)

    def array(self, key: str, *, required: bool = False) -> Any:
        return self._get(key, (list,), required)

    def str_map(self, key: str, *, required: bool = False, nullable: bool = False) -> Any:
        value = self.mapping(key, required=required)
        if value is None:
            return None
        for k, v in value.items():
            if not (isinstance(v, str) or (nullable and v is None)):
                raise InvalidTableError(
                    f"{self._where}: '{key}.{k}' must be a string, got {type(v).__name__}"
                )
        return dict(value)

    @property
    def where(self) -> str:
        """Where the object was read from (file, line and action), for error messages."""
        return self._where

    def raw(self, key: str) -> Any:
        self._seen.add(key)
        return self._obj.get(key)

    def extra(self) -> JsonDict:
        return {k: v for k, v in self._obj.items() if k not in self._seen}


def _put(out: JsonDict, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def deletion_vector_from_json(obj: Any, where: str) -> DeletionVectorDescriptor:
    """A deletion vector descriptor from its wire object.

    Raises:
        InvalidTableError: A field is missing or mistyped; the message starts with ``where``.
    """
    f = _Fields(obj, where + ".deletionVector")
    storage_type = f.text("storageType", required=True)
    if storage_type not in ("u", "i", "p"):
        raise InvalidTableError(f"{where}: unknown deletion vector storageType '{storage_type}'")
    return DeletionVectorDescriptor(
        storage_type=storage_type,
        path_or_inline_dv=f.text("pathOrInlineDv", required=True),
        offset=f.integer("offset"),
        size_in_bytes=f.integer("sizeInBytes", required=True),
        cardinality=f.integer("cardinality", required=True),
        max_row_index=f.integer("maxRowIndex"),
        extra=f.extra(),
    )


def deletion_vector_to_json(dv: DeletionVectorDescriptor) -> JsonDict:
    """The wire object of a deletion vector descriptor (unknown fields kept)."""
    out: JsonDict = {"storageType": dv.storage_type, "pathOrInlineDv": dv.path_or_inline_dv}
    _put(out, "offset", dv.offset)
    out["sizeInBytes"] = dv.size_in_bytes
    out["cardinality"] = dv.cardinality
    _put(out, "maxRowIndex", dv.max_row_index)
    out.update(dv.extra)
    return out


def _protocol_from(f: _Fields) -> ProtocolAction:
    rf = f.array("readerFeatures")
    wf = f.array("writerFeatures")
    return ProtocolAction(
        min_reader_version=f.integer("minReaderVersion", required=True),
        min_writer_version=f.integer("minWriterVersion", required=True),
        reader_features=None if rf is None else tuple(str(x) for x in rf),
        writer_features=None if wf is None else tuple(str(x) for x in wf),
        extra=f.extra(),
    )


def _protocol_to(a: ProtocolAction) -> JsonDict:
    out: JsonDict = {
        "minReaderVersion": a.min_reader_version,
        "minWriterVersion": a.min_writer_version,
    }
    _put(out, "readerFeatures", None if a.reader_features is None else list(a.reader_features))
    _put(out, "writerFeatures", None if a.writer_features is None else list(a.writer_features))
    out.update(a.extra)
    return out


def _metadata_from(f: _Fields) -> Metadata:
    fmt = _Fields(f.mapping("format") or {"provider": "parquet"}, "metaData.format")
    options = fmt.str_map("options") or {}
    cols = f.array("partitionColumns") or []
    if not all(isinstance(c, str) for c in cols):
        raise InvalidTableError("metaData: 'partitionColumns' must be a list of strings")
    return Metadata(
        id=f.text("id", required=True),
        name=f.text("name"),
        description=f.text("description"),
        format=Format(provider=fmt.text("provider") or "parquet", options=options),
        schema_string=f.text("schemaString", required=True),
        partition_columns=tuple(cols),
        configuration=f.str_map("configuration") or {},
        created_time=f.integer("createdTime"),
        extra=f.extra(),
    )


def _metadata_to(a: Metadata) -> JsonDict:
    out: JsonDict = {"id": a.id}
    _put(out, "name", a.name)
    _put(out, "description", a.description)
    out["format"] = {"provider": a.format.provider, "options": dict(a.format.options)}
    out["schemaString"] = a.schema_string
    out["partitionColumns"] = list(a.partition_columns)
    out["configuration"] = dict(a.configuration)
    _put(out, "createdTime", a.created_time)
    out.update(a.extra)
    return out


def _add_from(f: _Fields) -> AddFile:
    dv = f.mapping("deletionVector")
    return AddFile(
        path=f.text("path", required=True),
        partition_values=f.str_map("partitionValues", required=True, nullable=True),
        size=f.integer("size", required=True),
        modification_time=f.integer("modificationTime", required=True),
        data_change=f.boolean("dataChange", required=True),
        stats=f.text("stats"),
        tags=f.str_map("tags", nullable=True),
        deletion_vector=None if dv is None else deletion_vector_from_json(dv, f.where),
        base_row_id=f.integer("baseRowId"),
        default_row_commit_version=f.integer("defaultRowCommitVersion"),
        clustering_provider=f.text("clusteringProvider"),
        extra=f.extra(),
    )


def _add_to(a: AddFile) -> JsonDict:
    # Written out rather than through _put: this runs once per added file of every commit.
    out: JsonDict = {
        "path": a.path,
        "partitionValues": dict(a.partition_values),
        "size": a.size,
        "modificationTime": a.modification_time,
        "dataChange": a.data_change,
    }
    if a.stats is not None:
        out["stats"] = a.stats
    if a.tags is not None:
        out["tags"] = a.tags
    if a.deletion_vector is not None:
        out["deletionVector"] = deletion_vector_to_json(a.deletion_vector)
    if a.base_row_id is not None:
        out["baseRowId"] = a.base_row_id
    if a.default_row_commit_version is not None:
        out["defaultRowCommitVersion"] = a.default_row_commit_version
    if a.clustering_provider is not None:
        out["clusteringProvider"] = a.clustering_provider
    out.update(a.extra)
    return out


def _remove_from(f: _Fields) -> RemoveFile:
    dv = f.mapping("deletionVector")
    return RemoveFile(
        path=f.text("path", required=True),
        deletion_timestamp=f.integer("deletionTimestamp"),
        data_change=f.boolean("dataChange", required=True),
        extended_file_metadata=f.boolean("extendedFileMetadata"),
        partition_values=f.str_map("partitionValues", nullable=True),
        size=f.integer("size"),
        stats=f.text("stats"),
        tags=f.str_map("tags", nullable=True),
        deletion_vector=None if dv is None else deletion_vector_from_json(dv, f.where),
        base_row_id=f.integer("baseRowId"),
        default_row_commit_version=f.integer("defaultRowCommitVersion"),
        extra=f.extra(),
    )


def _remove_to(a: RemoveFile) -> JsonDict:
    out: JsonDict = {"path": a.path}
    _put(out, "deletionTimestamp", a.deletion_timestamp)
    out["dataChange"] = a.data_change
    _put(out, "extendedFileMetadata", a.extended_file_metadata)
    _put(out, "partitionValues", None if a.partition_values is None else dict(a.partition_values))
    _put(out, "size", a.size)
    _put(out, "stats", a.stats)
    _put(out, "tags", a.tags)
    _put(
        out,
        "deletionVector",
        None if a.deletion_vector is None else deletion_vector_to_json(a.deletion_vector),
    )
    _put(out, "baseRowId", a.base_row_id)
    _put(out, "defaultRowCommitVersion", a.default_row_commit_version)
    out.update(a.extra)
    return out


def _cdc_from(f: _Fields) -> AddCDCFile:
    return AddCDCFile(
        path=f.text("path", required=True),
        partition_values=f.str_map("partitionValues", required=True, nullable=True),
        size=f.integer("size", required=True),
        data_change=bool(f.boolean("dataChange")),
        tags=f.str_map("tags", nullable=True),
        extra=f.extra(),
    )


def _cdc_to(a: AddCDCFile) -> JsonDict:
    out: JsonDict = {
        "path": a.path,
        "partitionValues": dict(a.partition_values),
        "size": a.size,
        "dataChange": a.data_change,
    }
    _put(out, "tags", a.tags)
    out.update(a.extra)
    return out


def _txn_from(f: _Fields) -> SetTransaction:
    return SetTransaction(
        app_id=f.text("appId", required=True),
        version=f.integer("version", required=True),
        last_updated=f.integer("lastUpdated"),
        extra=f.extra(),
    )


def _txn_to(a: SetTransaction) -> JsonDict:
    out: JsonDict = {"appId": a.app_id, "version": a.version}
    _put(out, "lastUpdated", a.last_updated)
    out.update(a.extra)
    return out


def _domain_from(f: _Fields) -> DomainMetadata:
    return DomainMetadata(
        domain=f.text("domain", required=True),
        configuration=f.text("configuration", required=True),
        removed=bool(f.boolean("removed")),
        extra=f.extra(),
    )


def _domain_to(a: DomainMetadata) -> JsonDict:
    out: JsonDict = {"domain": a.domain, "configuration": a.configuration, "removed": a.removed}
    out.update(a.extra)
    return out


def _commit_info_from(f: _Fields) -> CommitInfo:
    return CommitInfo(
        timestamp=f.integer("timestamp"),
        operation=f.text("operation"),
        operation_parameters=f.mapping("operationParameters"),
        read_version=f.integer("readVersion"),
        isolation_level=f.text("isolationLevel"),
        is_blind_append=f.boolean("isBlindAppend"),
        operation_metrics=f.mapping("operationMetrics"),
        user_metadata=f.text("userMetadata"),
        engine_info=f.text("engineInfo"),
        txn_id=f.text("txnId"),
        in_commit_timestamp=f.integer("inCommitTimestamp"),
        extra=f.extra(),
    )


def _commit_info_to(a: CommitInfo) -> JsonDict:
    out: JsonDict = {}
    _put(out, "inCommitTimestamp", a.in_commit_timestamp)
    _put(out, "timestamp", a.timestamp)
    _put(out, "operation", a.operation)
    _put(out, "operationParameters", a.operation_parameters)
    _put(out, "readVersion", a.read_version)
    _put(out, "isolationLevel", a.isolation_level)
    _put(out, "isBlindAppend", a.is_blind_append)
    _put(out, "operationMetrics", a.operation_metrics)
    _put(out, "userMetadata", a.user_metadata)
    _put(out, "engineInfo", a.engine_info)
    _put(out, "txnId", a.txn_id)
    out.update(a.extra)
    return out


_DECODERS: dict[str, Callable[[_Fields], Action]] = {
    "protocol": _protocol_from,
    "metaData": _metadata_from,
    "add": _add_from,
    "remove": _remove_from,
    "cdc": _cdc_from,
    "txn": _txn_from,
    "domainMetadata": _domain_from,
    "commitInfo": _commit_info_from,
}


def action_from_json_obj(obj: Any, *, where: str = "action") -> Action:
    """Builds an action from a decoded JSON object with a single top-level key.

    Raises:
        InvalidTableError: The object is not a valid action; the message says where.
    """
    if not isinstance(obj, dict) or len(obj) != 1:
        raise InvalidTableError(f"{where}: an action must be a JSON object with exactly one key")
    ((key, value),) = obj.items()
    if key == "add" and type(value) is dict:
        plain = plain_add(value)
        if plain is not None:
            return plain
    decoder = _DECODERS.get(key)
    if decoder is None:
        return UnknownAction(key=key, value=value)
    return decoder(_Fields(value, f"{where} ({key})"))


def action_to_json_obj(action: Action) -> JsonDict:
    """The wire form of an action: a dict with one key, ready for ``json.dumps``."""
    match action:
        case ProtocolAction():
            return {"protocol": _protocol_to(action)}
        case Metadata():
            return {"metaData": _metadata_to(action)}
        case AddFile():
            return {"add": _add_to(action)}
        case RemoveFile():
            return {"remove": _remove_to(action)}
        case AddCDCFile():
            return {"cdc": _cdc_to(action)}
        case SetTransaction():
            return {"txn": _txn_to(action)}
        case DomainMetadata():
            return {"domainMetadata": _domain_to(action)}
        case CommitInfo():
            return {"commitInfo": _commit_info_to(action)}
        case UnknownAction():
            return {action.key: action.value}


def parse_action(line: str, *, where: str = "action") -> Action:
    """Parses one JSON line of a commit file.

    Raises:
        InvalidTableError: The line is not JSON or not a valid action.
    """
    if line.startswith('{"add":'):
        plain = plain_add_line(line)
        if plain is not None:
            return plain
    return _parse_checked(line, where)


def _parse_checked(line: str, where: str) -> Action:
    """One line through the standard parser and the action checks, with ``where`` in errors."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidTableError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        # Hostile nesting must surface as a typed error, not crash the reader.
        raise InvalidTableError(f"{where}: JSON nested too deeply") from None
    return action_from_json_obj(obj, where=where)


def serialize_action(action: Action) -> str:
    """One action as a compact JSON line (no trailing newline)."""
    return _line(action)[:-1].decode("utf-8")


def _line(action: Action) -> bytes:
    """One action as a compact JSON line, newline included, in UTF-8."""
    # Adds and removes are the bulk of a large commit, and every commit has a commitInfo.
    # Their known fields are strings, integers and booleans (a commitInfo's parameters and
    # metrics when all are text), which orjson writes byte for byte as the standard encoder
    # does, several times faster. It spells some floats differently, so unknown fields take
    # the standard path, as does anything it refuses, such as an integer beyond 64 bits.
    if type(action) is AddFile and not action.extra:
        fast = _orjson_line({"add": _add_to(action)})
    elif type(action) is RemoveFile and not action.extra:
        fast = _orjson_line({"remove": _remove_to(action)})
    elif (
        type(action) is CommitInfo
        and not action.extra
        and _texts_only(action.operation_parameters)
        and _texts_only(action.operation_metrics)
    ):
        fast = _orjson_line({"commitInfo": _commit_info_to(action)})
    else:
        fast = None
    if fast is not None:
        return fast
    text = json.dumps(action_to_json_obj(action), separators=_SEPARATORS, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _texts_only(values: Mapping[str, Any] | None) -> bool:
    return values is None or all(type(v) is str for v in values.values())


def _orjson_line(obj: JsonDict) -> bytes | None:
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return None


def parse_commit(data: bytes, *, where: str) -> list[Action]:
    """Parses a whole commit file; ``where`` names it in errors (with the line number).

    Raises:
        InvalidTableError: The file is not UTF-8 or a line is not a valid action.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidTableError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    actions: list[Action] = []
    add = actions.append
    for number, line in enumerate(text.split("\n"), start=1):
        # Plain adds, the bulk of a commit, skip the per-line error context (a conflict check
        # reads every winner's); any other line is parsed once, by the checked path.
        if line.startswith('{"add":') and (plain := plain_add_line(line)) is not None:
            add(plain)
        elif line.strip():
            add(_parse_checked(line, f"{where} line {number}"))
    return actions


def serialize_commit(actions: Iterable[Action]) -> bytes:
    """A whole commit file: one JSON line per action, newline-terminated."""
    chunks: list[bytes] = []
    # The bulk of a commit: adds without a deletion vector or unknown fields, written a run at
    # a time by add_lines, whose record has neither. Which adds it takes is decided here only,
    # written out inline because it runs once per add.
    run: list[AddFile] = []
    for a in actions:
        if type(a) is AddFile and a.deletion_vector is None and not a.extra:
            run.append(a)
            continue
        if run:
            chunks.append(_add_run(run))
            run = []
        chunks.append(_line(a))
    if run:
        chunks.append(_add_run(run))
    return b"".join(chunks)


def _add_run(adds: list[AddFile]) -> bytes:
    lines = add_lines(adds)
    if lines is None:
        # An add the encoder refuses (a lone surrogate, a key that is not text, partition
        # values that are not a dict) sends the run to the per-action path, which refuses or
        # writes each exactly as before.
        return b"".join(_line(a) for a in adds)
    return lines
