"""Bulk decoding of ``add`` and ``remove`` lines into Arrow, without a dict per action.

Large commits are almost entirely file actions. Decoding each line into Python dicts and then
converting the dicts to Arrow was most of the cost of loading a snapshot, so lines that start
like a file action are decoded by a typed decoder (msgspec) into slotted records whose layout
is derived from the state's wire fields (:mod:`deltatx.log._state`), and the records become
Arrow columns in bulk. Statistics stay JSON text until data skipping asks for them.

A line the typed decoder cannot take (a field of the wrong type, a second top-level key, bad
UTF-8, an integer outside the Java long range) is not an error here: the caller decodes it the
slow way, whose strict codec either accepts it or names exactly what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Annotated, Any

import msgspec
import pyarrow as pa

from deltatx.log import _state

_LONG = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_INT = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
_STR_MAP = dict[str, str | None]
# Fields every decoded action must carry, by wire name; absent ones send the line to the codec.
_DV_REQUIRED = frozenset({"storageType", "pathOrInlineDv", "sizeInBytes", "cardinality"})
_ADD_REQUIRED = frozenset({"path", "size", "modificationTime", "dataChange"})
_REMOVE_REQUIRED = frozenset({"path", "dataChange"})


def _python_type(arrow_type: pa.DataType, dv: type) -> Any:
    if arrow_type == _state.DV_TYPE:
        return dv
    if arrow_type == _state.STR_MAP:
        return _STR_MAP
    if pa.types.is_string(arrow_type):
        return str
    if pa.types.is_boolean(arrow_type):
        return bool
    if pa.types.is_int32(arrow_type):
        return _INT
    if pa.types.is_integer(arrow_type):
        return _LONG
    raise TypeError(f"no wire type for {arrow_type}")  # pragma: no cover - a schema edit


def _record(
    name: str,
    fields: tuple[tuple[str, str, pa.DataType], ...],
    required: frozenset[str],
    dv: type,
) -> Any:
    specs: list[Any] = []
    # msgspec wants required fields first.
    for _, wire, arrow_type in sorted(fields, key=lambda f: f[1] not in required):
        python_type = _python_type(arrow_type, dv)
        if wire in required:
            specs.append((wire, python_type))
        else:
            specs.append((wire, python_type | None, None))
    return msgspec.defstruct(name, specs)


_DV_RECORD: Any = _record("DeletionVectorLine", _state.DV_FIELDS, _DV_REQUIRED, type(None))
_ADD_RECORD: Any = _record("AddLine", _state.ADD_FIELDS, _ADD_REQUIRED, _DV_RECORD)
_REMOVE_RECORD: Any = _record("RemoveLine", _state.REMOVE_FIELDS, _REMOVE_REQUIRED, _DV_RECORD)
# One top-level key and nothing else: a line with more is the codec's to reject.
_ADD_DECODER: Any = msgspec.json.Decoder(
    msgspec.defstruct("AddAction", [("add", _ADD_RECORD)], forbid_unknown_fields=True)
)
_REMOVE_DECODER: Any = msgspec.json.Decoder(
    msgspec.defstruct("RemoveAction", [("remove", _REMOVE_RECORD)], forbid_unknown_fields=True)
)
_ADD_PREFIX = b'{"add":'
_REMOVE_PREFIX = b'{"remove":'
_DECODE_ERRORS = (msgspec.MsgspecError, UnicodeDecodeError)


@dataclass(slots=True)
class FileActionBatch:
    """File actions decoded so far, in log order, each with its position for messages.

    Records are turned into Arrow chunks by :meth:`flush` (the replay flushes whenever many
    have gathered), so a large log is not held as Python objects and as Arrow at once.

    Attributes:
        adds: Decoded ``add`` records not yet flushed.
        add_positions: ``(sequence, file, line)`` of every add: its order in the batch and
            where it came from.
        removes: Decoded ``remove`` records not yet flushed.
        remove_positions: Likewise for the removes.
        add_chunks: The flushed adds, as state tables.
        remove_chunks: The flushed removes, as tombstone tables.
        deletion_vector_wires: ``(file, line, kind, wire object)`` of every flushed action
            that has a deletion vector, for the descriptor checks.
    """

    adds: list[Any] = field(default_factory=list)
    add_positions: list[tuple[int, str, int]] = field(default_factory=list)
    removes: list[Any] = field(default_factory=list)
    remove_positions: list[tuple[int, str, int]] = field(default_factory=list)
    add_chunks: list[pa.Table] = field(default_factory=list)
    remove_chunks: list[pa.Table] = field(default_factory=list)
    deletion_vector_wires: list[tuple[str, int, str, dict[str, Any]]] = field(default_factory=list)
    _sequence: int = 0

    def flush(self) -> None:
        """Turns the pending records into Arrow chunks and drops them."""
        if self.adds:
            positions = self.add_positions[len(self.add_positions) - len(self.adds) :]
            for where, line, wire in deletion_vectors(self.adds, positions):
                self.deletion_vector_wires.append((where, line, "add", wire))
            self.add_chunks.append(files_table(self.adds))
            self.adds = []
        if self.removes:
            positions = self.remove_positions[len(self.remove_positions) - len(self.removes) :]
            for where, line, wire in deletion_vectors(self.removes, positions):
                self.deletion_vector_wires.append((where, line, "remove", wire))
            self.remove_chunks.append(tombstones_table(self.removes))
            self.removes = []

    @property
    def pending(self) -> int:
        """How many decoded records wait for :meth:`flush`."""
        return len(self.adds) + len(self.removes)

    def files(self) -> pa.Table:
        """Every add taken, flushed first, as one state table (in order)."""
        self.flush()
        if not self.add_chunks:
            return _state.empty_files()
        return pa.concat_tables(self.add_chunks)

    def tombstones(self) -> pa.Table:
        """Every remove taken, flushed first, as one tombstone table (in order)."""
        self.flush()
        if not self.remove_chunks:
            return _state.empty_tombstones()
        return pa.concat_tables(self.remove_chunks)

    def __len__(self) -> int:
        return self._sequence

    def take_line(self, line: bytes, where: str, lineno: int) -> bool:
        """Decodes ``line`` when it is a well-formed file action; False leaves it to the codec."""
        if line.startswith(_ADD_PREFIX):
            try:
                record = _ADD_DECODER.decode(line).add
            except _DECODE_ERRORS:
                return False
            self.adds.append(record)
            self.add_positions.append((self._sequence, where, lineno))
        elif line.startswith(_REMOVE_PREFIX):
            try:
                record = _REMOVE_DECODER.decode(line).remove
            except _DECODE_ERRORS:
                return False
            self.removes.append(record)
            self.remove_positions.append((self._sequence, where, lineno))
        else:
            return False
        self._sequence += 1
        return True

    def take_object(self, kind: str, body: dict[str, Any], where: str, lineno: int) -> bool:
        """Adds an already decoded file action; False when its fields do not fit the records."""
        record_type = _ADD_RECORD if kind == "add" else _REMOVE_RECORD
        try:
            record = msgspec.convert(body, record_type)
        except msgspec.MsgspecError:
            return False
        if kind == "add":
            self.adds.append(record)
            self.add_positions.append((self._sequence, where, lineno))
        else:
            self.removes.append(record)
            self.remove_positions.append((self._sequence, where, lineno))
        self._sequence += 1
        return True


def deletion_vectors(
    records: list[Any], positions: list[tuple[int, str, int]]
) -> list[tuple[str, int, dict[str, Any]]]:
    """``(where, line, wire object)`` of the deletion vector of every record that has one."""
    out = []
    for record, (_, where, line) in zip(records, positions, strict=True):
        dv = record.deletionVector
        if dv is not None:
            wire = {w: getattr(dv, w) for _, w, _t in _state.DV_FIELDS}
            out.append((where, line, {k: v for k, v in wire.items() if v is not None}))
    return out


def _dv_value(dv: Any) -> dict[str, Any] | None:
    if dv is None:
        return None
    return {state: getattr(dv, wire) for state, wire, _ in _state.DV_FIELDS}


def _table(
    records: list[Any], fields: tuple[tuple[str, str, pa.DataType], ...], schema: pa.Schema
) -> pa.Table:
    columns: list[pa.Array] = []
    n = len(records)
    for _, wire, arrow_type in fields:
        values = list(map(attrgetter(wire), records))
        if values.count(None) == n:
            # Optional fields are mostly absent: a column of nulls is made in a fifth of the
            # time a list of Nones of a map or struct type takes to convert.
            columns.append(pa.nulls(n, type=arrow_type))
            continue
        if arrow_type == _state.DV_TYPE:
            values = [_dv_value(v) for v in values]
        columns.append(pa.array(values, type=arrow_type))
    return pa.Table.from_arrays(columns, schema=schema)


def files_table(records: list[Any]) -> pa.Table:
    """The decoded adds as a state table (``_state.FILES_SCHEMA``)."""
    if not records:
        return _state.empty_files()
    return _table(records, _state.ADD_FIELDS, _state.FILES_SCHEMA)


def tombstones_table(records: list[Any]) -> pa.Table:
    """The decoded removes as a tombstone table (``_state.TOMBSTONES_SCHEMA``)."""
    if not records:
        return _state.empty_tombstones()
    return _table(records, _state.REMOVE_FIELDS, _state.TOMBSTONES_SCHEMA)
