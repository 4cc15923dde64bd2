"""A table version: protocol, metadata and the live files as one Arrow table.

Replay follows the protocol's reconciliation: the newest protocol and metaData win, the latest
txn per appId and domainMetadata per domain, and file actions are keyed by
``(path, deletion vector id)`` with the newest action winning. Commits are decoded with the
standard ``json`` module and add/remove objects go straight into Arrow in bulk; the strict
codec only runs for the rare actions and to pinpoint the line of a malformed one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.codec import action_from_json_obj, deletion_vector_from_json
from deltatx.kernel.deletion_vectors import check_descriptor
from deltatx.kernel.expressions import Expression
from deltatx.kernel.features import check_readable
from deltatx.kernel.file_predicate import FilePredicate
from deltatx.kernel.properties import TableProperties
from deltatx.kernel.schema import StructType, parse_schema
from deltatx.kernel.table_configuration import TableConfiguration
from deltatx.log import _state
from deltatx.log.file_actions import FileActionBatch

# Decoded file actions held as Python records before they become an Arrow chunk: a chunk per
# commit made a log of 10,000 one-file commits load in 2.5 s instead of 0.2 s, and holding the
# whole log as records doubles its memory.
_FLUSH_RECORDS = 16_384

# Past this many chunks the Arrow state is compacted, so long runs of incremental updates do
# not leave thousands of tiny chunks behind.
_MAX_CHUNKS = 64

# A table state this large, updated a second time in a row, gets a set of its live file keys,
# so that later updates find the files a commit replaces by looking up that commit's keys
# rather than by matching every live key against them (about 1 ms per 100,000 files).
INDEX_FROM_FILES = 16_384


@dataclass(slots=True)
class CommitData:
    """One commit file as read from storage."""

    version: int
    path: str
    data: bytes
    modification_time: int | None = None


@dataclass(slots=True)
class TableState:
    """The reconciled state of a version, before it is wrapped in a :class:`Snapshot`."""

    protocol: ProtocolAction | None
    metadata: Metadata | None
    files: pa.Table
    file_keys: pa.ChunkedArray | pa.Array
    tombstones: pa.Table
    tombstone_keys: pa.ChunkedArray | pa.Array
    app_transactions: dict[str, SetTransaction] = field(default_factory=dict)
    domain_metadata: dict[str, DomainMetadata] = field(default_factory=dict)
    # Exactly the values of ``file_keys`` when set; one state holds a given set at a time.
    file_index: set[str] | None = None
    # How many incremental updates in a row led to this state (0 after a full load).
    updates: int = 0


def empty_state() -> TableState:
    """The state before version 0."""
    return TableState(
        protocol=None,
        metadata=None,
        files=_state.empty_files(),
        file_keys=pa.array([], pa.string()),
        tombstones=_state.empty_tombstones(),
        tombstone_keys=pa.array([], pa.string()),
    )


def _fail_at(obj: dict[str, Any], where: str, why: str) -> InvalidTableError:
    """The precise codec error for a bad action, or a generic one naming the line."""
    try:
        action_from_json_obj(obj, where=where)
    except InvalidTableError as exc:
        return exc
    return InvalidTableError(f"{where}: {why}")


def replay(
    base: TableState, commits: Iterable[CommitData], *, table: str
) -> tuple[TableState, int | None]:
    """Applies commits, in order, on top of ``base``.

    Returns:
        The new state and the time of the last commit (``commitInfo.inCommitTimestamp``,
        else ``commitInfo.timestamp``; None if it has neither).

    Raises:
        InvalidTableError: A commit is malformed (the message names file and line), version 0
            lacks protocol or metaData, or the result has no protocol or metadata.
        UnsupportedFeatureError: The resulting protocol cannot be read by deltatx.
    """
    loads = json.loads
    decode_error = json.JSONDecodeError
    batch = FileActionBatch()
    protocol, metadata = base.protocol, base.metadata
    txns = dict(base.app_transactions)
    domains = dict(base.domain_metadata)
    last_ts: int | None = None
    pending_metadata: tuple[dict[str, Any], str] | None = None
    for commit in commits:
        where = commit.path
        data = commit.data
        commit_ts: int | None = None
        saw_protocol = saw_metadata = False
        if not data or data.isspace():
            # Every writer puts at least one action in a commit; an empty file is a torn
            # write on a store without atomic puts, and reading it as "no change" would hide
            # whatever the commit held.
            raise InvalidTableError(f"{where}: the commit file is empty")
        offset = 0
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            start, offset = offset, offset + len(raw) + 1
            if not raw or raw.isspace() or batch.take_line(raw, where, lineno):
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidTableError(
                    f"{where}: not UTF-8 text (byte {start + exc.start})"
                ) from None
            try:
                obj = loads(line)
            except decode_error as exc:
                raise InvalidTableError(
                    f"{where} line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
            except RecursionError:
                # Hostile nesting must surface as a typed error, not crash the reader.
                raise InvalidTableError(f"{where} line {lineno}: JSON nested too deeply") from None
            if type(obj) is not dict or len(obj) != 1:
                raise InvalidTableError(
                    f"{where} line {lineno}: an action must be a JSON object with exactly one key"
                )
            ((kind, body),) = obj.items()
            if kind == "add" or kind == "remove":
                if type(body) is not dict or not batch.take_object(kind, body, where, lineno):
                    raise _fail_at(obj, f"{where} line {lineno}", "malformed file action")
            elif kind == "commitInfo":
                # With in-commit timestamps on, the recorded one is the commit's time.
                ts = None
                if type(body) is dict:
                    ts = body.get("inCommitTimestamp")
                    ts = ts if type(ts) is int else body.get("timestamp")
                commit_ts = ts if type(ts) is int else None
            elif kind == "metaData":
                # Decoded only if no later metaData supersedes it: some writers (Databricks
                # Delta Live Tables) leave a partial one, without a schema, before the full one.
                pending_metadata, saw_metadata = (obj, f"{where} line {lineno}"), True
            elif kind in ("protocol", "txn", "domainMetadata"):
                action = action_from_json_obj(obj, where=f"{where} line {lineno}")
                if isinstance(action, ProtocolAction):
                    protocol, saw_protocol = action, True
                elif isinstance(action, SetTransaction):
                    txns[action.app_id] = action
                elif isinstance(action, DomainMetadata):
                    if action.removed:
                        domains.pop(action.domain, None)
                    else:
                        domains[action.domain] = action
            # cdc, commitInfo details and unknown actions do not change the table state.
        if batch.pending >= _FLUSH_RECORDS:
            batch.flush()
        if commit.version == 0 and not (saw_protocol and saw_metadata):
            missing = " and ".join(
                n for n, s in (("protocol", saw_protocol), ("metaData", saw_metadata)) if not s
            )
            raise InvalidTableError(f"{where}: version 0 has no {missing} action")
        last_ts = commit_ts
    if pending_metadata is not None:
        decoded = action_from_json_obj(pending_metadata[0], where=pending_metadata[1])
        assert isinstance(decoded, Metadata)
        metadata = decoded
    if protocol is None or metadata is None:
        missing = "protocol" if protocol is None else "metaData"
        raise InvalidTableError(f"{table}: the log has no {missing} action")
    check_readable(protocol)
    state = TableState(
        protocol=protocol,
        metadata=metadata,
        files=base.files,
        file_keys=base.file_keys,
        tombstones=base.tombstones,
        tombstone_keys=base.tombstone_keys,
        app_transactions=txns,
        domain_metadata=domains,
        file_index=base.file_index,
        updates=base.updates,
    )
    if len(batch):
        _apply_files(state, batch, table)
    return state, last_ts


def _check_batch(batch: FileActionBatch, adds: pa.Table) -> None:
    for where, lineno, kind, wire in batch.deletion_vector_wires:
        at = f"{where} line {lineno} ({kind})"
        check_descriptor(deletion_vector_from_json(wire, at), at)
    if (row := _state.negative_size(adds)) is not None:
        _, where, lineno = batch.add_positions[row]
        raise InvalidTableError(
            f"{where} line {lineno}: add {adds.column('path')[row].as_py()!r} has a negative "
            f"size ({adds.column('size')[row].as_py()})"
        )


def _newest_only(
    adds: pa.Table,
    add_keys: pa.Array,
    removes: pa.Table,
    remove_keys: pa.Array,
    batch: FileActionBatch,
) -> tuple[pa.Table, pa.Array, pa.Table, pa.Array]:
    """Keeps, for a key that several actions of the batch name, only the newest action."""
    sequences = [p[0] for p in batch.add_positions] + [p[0] for p in batch.remove_positions]
    keys = add_keys.to_pylist() + remove_keys.to_pylist()
    newest: dict[str, int] = {}
    for key, sequence in zip(keys, sequences, strict=True):
        if sequence > newest.get(key, -1):
            newest[key] = sequence
    keep = pa.array([newest[k] == s for k, s in zip(keys, sequences, strict=True)])
    n = adds.num_rows
    keep_adds, keep_removes = keep.slice(0, n), keep.slice(n)
    return (
        adds.filter(keep_adds),
        add_keys.filter(keep_adds),
        removes.filter(keep_removes),
        remove_keys.filter(keep_removes),
    )


def _apply_files(state: TableState, batch: FileActionBatch, table: str) -> None:
    adds = batch.files()
    removes = batch.tombstones()
    _check_batch(batch, adds)
    add_keys = _state.table_keys(adds, root=table).combine_chunks()
    remove_keys = _state.table_keys(removes, root=table).combine_chunks()
    touched = pc.unique(pa.concat_arrays([add_keys, remove_keys]))
    if len(touched) < len(batch):
        adds, add_keys, removes, remove_keys = _newest_only(
            adds, add_keys, removes, remove_keys, batch
        )
    index = state.file_index
    if index is None and state.updates >= 2 and state.files.num_rows >= INDEX_FROM_FILES:
        index = set(state.file_keys.to_pylist())
    state.files, state.file_keys = _merge(
        state.files, state.file_keys, touched, adds, add_keys, index=index
    )
    state.file_index = index
    state.tombstones, state.tombstone_keys = _merge(
        state.tombstones, state.tombstone_keys, touched, removes, remove_keys
    )


def _merge(
    table: pa.Table,
    keys: pa.ChunkedArray | pa.Array,
    touched: pa.Array,
    new: pa.Table,
    new_keys: pa.Array,
    *,
    index: set[str] | None = None,
) -> tuple[pa.Table, pa.ChunkedArray]:
    """The state's rows whose key the batch touched give way to the batch's ``new`` rows.

    With ``index`` (the set of ``keys``), it is looked up for the touched keys and then made
    the set of the merged keys.
    """
    if isinstance(keys, pa.Array):
        keys = pa.chunked_array([keys], type=pa.string())
    if index is None:
        touched_keys: list[str] = []
        replaces = table.num_rows > 0
    else:
        touched_keys = touched.to_pylist()
        replaces = not index.isdisjoint(touched_keys)
    if replaces:
        hits = pc.is_in(keys, value_set=touched)
        if pc.any(hits).as_py():
            table, keys = _drop_rows(table, keys, hits)
    if index is not None:
        index.difference_update(touched_keys)
        index.update(new_keys.to_pylist())
    merged = pa.concat_tables([table, new]) if new.num_rows else table
    merged_keys = pa.chunked_array([*keys.chunks, new_keys], type=pa.string())
    if merged.column(0).num_chunks > _MAX_CHUNKS:
        merged = merged.combine_chunks()
        merged_keys = pa.chunked_array([merged_keys.combine_chunks()])
    return merged, merged_keys


def _drop_rows(
    table: pa.Table, keys: pa.ChunkedArray, hits: pa.ChunkedArray
) -> tuple[pa.Table, pa.ChunkedArray]:
    rows = pc.indices_nonzero(hits).to_pylist()
    if len(rows) > _MAX_CHUNKS:
        keep = pc.invert(hits)
        return table.filter(keep), keys.filter(keep)
    # A few removals against a large state: zero-copy slices around them instead of a
    # filter that would copy every column of every live file.
    pieces: list[pa.Table] = []
    key_pieces: list[pa.Array] = []
    start = 0
    for row in [*rows, table.num_rows]:
        if row > start:
            pieces.append(table.slice(start, row - start))
            key_pieces.extend(keys.slice(start, row - start).chunks)
        start = row + 1
    if not pieces:
        return table.slice(0, 0), pa.chunked_array([], type=pa.string())
    return pa.concat_tables(pieces), pa.chunked_array(key_pieces, type=pa.string())


_INDEX_MOVE = threading.Lock()


class Snapshot:
    """The state of a table at one version: a value, read by :class:`DeltaLog`.

    A snapshot does no I/O and knows nothing of the log that read it; whatever needs storage
    (reading deletion vectors or data, loading a newer version) goes through the
    :class:`DeltaLog` with the snapshot as an argument.

    Attributes:
        table_path: The canonical root of the table.
        version: The table version.
        protocol: The protocol in force.
        metadata: The table metadata in force.
        files: The live files, one row per file (see ``deltatx.log._state.FILES_SCHEMA``:
            path, partition_values, size, modification_time, data_change, stats, tags,
            deletion_vector struct with snake_case fields, base_row_id,
            default_row_commit_version, clustering_provider).
        app_transactions: The latest ``txn`` per application id.
        domain_metadata: The live (not removed) metadata domains.
    """

    __slots__ = (
        "_add_files",
        "_file_index",
        "_file_keys",
        "_properties",
        "_schema",
        "_table_configuration",
        "_timestamp",
        "_tombstone_keys",
        "_tombstones",
        "_updates",
        "app_transactions",
        "domain_metadata",
        "files",
        "metadata",
        "protocol",
        "table_path",
        "version",
    )

    def __init__(
        self,
        table_path: str,
        version: int,
        state: TableState,
        *,
        timestamp: int,
        previous: Snapshot | None = None,
    ) -> None:
        """Wraps a reconciled state; use :meth:`DeltaLog.snapshot` to get one.

        ``previous`` is an older snapshot of the same table: what it derived from the very
        same protocol and metadata (schema, properties, configuration) is reused, so a chain
        of updates that leave them unchanged validates and parses them once.
        """
        assert state.protocol is not None and state.metadata is not None
        self.table_path = table_path
        self.version = version
        self.protocol: ProtocolAction = state.protocol
        self.metadata: Metadata = state.metadata
        self.files: pa.Table = state.files
        self.app_transactions: dict[str, SetTransaction] = state.app_transactions
        self.domain_metadata: dict[str, DomainMetadata] = state.domain_metadata
        self._file_keys = state.file_keys
        self._file_index = state.file_index
        self._updates = state.updates
        self._tombstones: pa.Table = state.tombstones
        self._tombstone_keys = state.tombstone_keys
        self._timestamp = timestamp
        self._schema: StructType | None = None
        self._properties: TableProperties | None = None
        self._table_configuration: TableConfiguration | None = None
        self._add_files: list[AddFile] | None = None
        if previous is not None and previous.metadata is self.metadata:
            self._schema = previous._schema
            self._properties = previous._properties
            if previous.protocol is self.protocol:
                self._table_configuration = previous._table_configuration

    def __repr__(self) -> str:
        return f"Snapshot({self.table_path!r}, version={self.version}, files={self.num_files})"

    def state(self) -> TableState:
        """The reconciled state (for checkpoints; updates take :meth:`state_to_update`)."""
        return TableState(
            protocol=self.protocol,
            metadata=self.metadata,
            files=self.files,
            file_keys=self._file_keys,
            tombstones=self._tombstones,
            tombstone_keys=self._tombstone_keys,
            app_transactions=self.app_transactions,
            domain_metadata=self.domain_metadata,
        )

    def state_to_update(self) -> TableState:
        """The reconciled state for an incremental update, with the set of live file keys.

        The set moves to the state (the update changes it in place): a second update from
        this snapshot matches keys in Arrow, as the first did before the set was made.
        """
        state = self.state()
        with _INDEX_MOVE:
            state.file_index, self._file_index = self._file_index, None
        state.updates = self._updates + 1
        return state

    @property
    def timestamp(self) -> int:
        """When this version was committed, in milliseconds since the epoch."""
        return self._timestamp

    @property
    def schema(self) -> StructType:
        """The table schema, parsed from the metadata."""
        if self._schema is None:
            self._schema = parse_schema(self.metadata.schema_string)
        return self._schema

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns, in order."""
        return self.metadata.partition_columns

    @property
    def properties(self) -> TableProperties:
        """The interpreted table properties."""
        if self._properties is None:
            self._properties = TableProperties.from_configuration(self.metadata.configuration)
        return self._properties

    @property
    def table_configuration(self) -> TableConfiguration:
        """How this version is configured (features, properties, schema), derived once."""
        if self._table_configuration is None:
            self._table_configuration = TableConfiguration.of(self.protocol, self.metadata)
        return self._table_configuration

    @property
    def num_files(self) -> int:
        """How many live files the table has."""
        return int(self.files.num_rows)

    @property
    def size_in_bytes(self) -> int:
        """The total size of the live files."""
        if not self.files.num_rows:
            return 0
        return int(pc.sum(self.files.column("size")).as_py() or 0)

    def add_files(self) -> list[AddFile]:
        """The live files as :class:`AddFile` objects (built once, then cached)."""
        if self._add_files is None:
            self._add_files = _state.add_files_from_table(self.files)
        return list(self._add_files)

    def scan_files(self, predicate: Expression | None = None) -> list[AddFile]:
        """The live files that may hold rows matching ``predicate`` (all files for None).

        Pruning uses partition values and min/max/null-count statistics; a file is kept
        whenever it cannot be ruled out.
        """
        if predicate is None:
            return self.add_files()
        # Compiled once and asked of every file column by column: at 100 files, a fifth of
        # the CPU of asking file_may_match file by file, with the same answers.
        compiled = FilePredicate(
            predicate, schema=self.schema, partition_columns=self.partition_columns
        )
        if self._add_files is not None:
            return list(compress(self._add_files, compiled.matches(self._add_files)))
        # Skipping reads two columns of the state; only the files it keeps become actions.
        summaries = _state.file_summaries(self.files, partitioned=bool(self.partition_columns))
        keep = compiled.matches(summaries)
        return _state.add_files_from_table(self.files.filter(pa.array(keep, pa.bool_())))

    def tombstones(self, *, now_ms: int | None = None) -> list[RemoveFile]:
        """Removed files still within ``delta.deletedFileRetentionDuration`` of ``now_ms``."""
        return _state.remove_files_from_table(self.tombstone_table(now_ms=now_ms))

    def tombstone_table(self, *, now_ms: int | None = None) -> pa.Table:
        """The unexpired tombstones as an Arrow table (``_state.TOMBSTONES_SCHEMA``)."""
        if not self._tombstones.num_rows:
            return self._tombstones
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cutoff = now - self.properties.deleted_file_retention_ms
        ts = pc.fill_null(self._tombstones.column("deletion_timestamp"), 0)
        return self._tombstones.filter(pc.greater(ts, cutoff))

    def app_transaction_version(self, app_id: str) -> int | None:
        """The latest version committed by application ``app_id``, or None."""
        txn = self.app_transactions.get(app_id)
        return None if txn is None else txn.version
