"""Columnar table state: the Arrow schemas of live files and tombstones, and conversions.

The log's wire form (JSON lines, checkpoint columns) uses camelCase names; the in-memory state
uses snake_case columns. Files are keyed by ``(path, deletion vector unique id)`` during
replay; the key is kept as one string column (``path`` alone when there is no DV) so that
applying a commit is a vectorised ``is_in`` rather than a Python loop over every file. The
path part is the file's canonical key (:func:`deltatx.kernel.file_paths.file_key`), so every
spelling of one file (``a%20b``, ``a b``, ``/root/a b``, ``file:///root/a%20b``) is one file,
as delta-spark canonicalises paths during replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor, FileSummary, RemoveFile
from deltatx.kernel.file_paths import PLAIN_PATH_NOT, file_key

STR_MAP = pa.map_(pa.string(), pa.string())

# (state name, wire name, state type); DV struct fields follow the same pattern.
DV_FIELDS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("storage_type", "storageType", pa.string()),
    ("path_or_inline_dv", "pathOrInlineDv", pa.string()),
    ("offset", "offset", pa.int32()),
    ("size_in_bytes", "sizeInBytes", pa.int32()),
    ("cardinality", "cardinality", pa.int64()),
    ("max_row_index", "maxRowIndex", pa.int64()),
)
DV_TYPE = pa.struct([(s, t) for s, _, t in DV_FIELDS])
DV_WIRE_TYPE = pa.struct([(w, t) for _, w, t in DV_FIELDS])
# What checkpoints carry (delta-spark's checkpoint schema has no maxRowIndex).
DV_CHECKPOINT_TYPE = pa.struct([(w, t) for _, w, t in DV_FIELDS[:5]])

ADD_FIELDS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("path", "path", pa.string()),
    ("partition_values", "partitionValues", STR_MAP),
    ("size", "size", pa.int64()),
    ("modification_time", "modificationTime", pa.int64()),
    ("data_change", "dataChange", pa.bool_()),
    ("stats", "stats", pa.string()),
    ("tags", "tags", STR_MAP),
    ("deletion_vector", "deletionVector", DV_TYPE),
    ("base_row_id", "baseRowId", pa.int64()),
    ("default_row_commit_version", "defaultRowCommitVersion", pa.int64()),
    ("clustering_provider", "clusteringProvider", pa.string()),
)
REMOVE_FIELDS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("path", "path", pa.string()),
    ("deletion_timestamp", "deletionTimestamp", pa.int64()),
    ("data_change", "dataChange", pa.bool_()),
    ("extended_file_metadata", "extendedFileMetadata", pa.bool_()),
    ("partition_values", "partitionValues", STR_MAP),
    ("size", "size", pa.int64()),
    ("deletion_vector", "deletionVector", DV_TYPE),
    ("base_row_id", "baseRowId", pa.int64()),
    ("default_row_commit_version", "defaultRowCommitVersion", pa.int64()),
)

ADD_WIRE_NAMES = tuple(w for _, w, _t in ADD_FIELDS)
REMOVE_WIRE_NAMES = tuple(w for _, w, _t in REMOVE_FIELDS)
FILES_SCHEMA = pa.schema([(s, t) for s, _, t in ADD_FIELDS])
TOMBSTONES_SCHEMA = pa.schema([(s, t) for s, _, t in REMOVE_FIELDS])


def _wire_type(fields: Sequence[tuple[str, str, pa.DataType]]) -> pa.DataType:
    return pa.struct([(w, DV_WIRE_TYPE if t == DV_TYPE else t) for _, w, t in fields])


ADD_WIRE_TYPE = _wire_type(ADD_FIELDS)
REMOVE_WIRE_TYPE = _wire_type(REMOVE_FIELDS)
ADD_REQUIRED = ("path", "size", "modification_time", "data_change")
REMOVE_REQUIRED = ("path", "data_change")


def empty_files() -> pa.Table:
    """A state table with no live file."""
    return FILES_SCHEMA.empty_table()


def empty_tombstones() -> pa.Table:
    """A state table with no tombstone."""
    return TOMBSTONES_SCHEMA.empty_table()


def _field(struct: pa.Array, name: str, target: pa.DataType, n: int) -> pa.Array:
    """Child ``name`` of a wire struct cast to ``target``; nulls when the child is absent."""
    index = struct.type.get_field_index(name)
    if index < 0:
        return pa.nulls(n, type=target)
    # flatten() (unlike field()) applies the parent's validity, which the state relies on.
    child = struct.flatten()[index] if struct.null_count else struct.field(index)
    if target == DV_TYPE:
        return _dv_from_wire(child)
    if child.type != target:
        child = child.cast(target)
    return child


def _dv_from_wire(dv: pa.Array) -> pa.Array:
    n = len(dv)
    if dv.null_count == n:
        return pa.nulls(n, type=DV_TYPE)
    children = [_field(dv, w, t, n) for _, w, t in DV_FIELDS]
    return pa.StructArray.from_arrays(children, fields=list(DV_TYPE), mask=dv.is_null())


def _from_wire(
    struct: pa.Array, fields: Sequence[tuple[str, str, pa.DataType]], schema: pa.Schema
) -> pa.Table:
    if isinstance(struct, pa.ChunkedArray):
        struct = struct.combine_chunks() if struct.num_chunks else pa.array([], struct.type)
    n = len(struct)
    return pa.Table.from_arrays([_field(struct, w, t, n) for _, w, t in fields], schema=schema)


def files_from_wire(struct: pa.Array) -> pa.Table:
    """Live files from a column of ``add`` structs (all rows valid)."""
    return _from_wire(struct, ADD_FIELDS, FILES_SCHEMA)


def tombstones_from_wire(struct: pa.Array) -> pa.Table:
    """Tombstones from a column of ``remove`` structs (all rows valid)."""
    return _from_wire(struct, REMOVE_FIELDS, TOMBSTONES_SCHEMA)


def files_from_dicts(dicts: list[dict[str, Any]]) -> pa.Table:
    """Live files from decoded ``add`` JSON objects (extra keys are ignored).

    Raises:
        pyarrow.ArrowException: A value has the wrong type (the caller locates it).
    """
    if not dicts:
        return empty_files()
    return files_from_wire(pa.array(dicts, type=ADD_WIRE_TYPE))


def tombstones_from_dicts(dicts: list[dict[str, Any]]) -> pa.Table:
    """Tombstones from decoded ``remove`` JSON objects (extra keys are ignored)."""
    if not dicts:
        return empty_tombstones()
    return tombstones_from_wire(pa.array(dicts, type=REMOVE_WIRE_TYPE))


def missing_required(table: pa.Table, required: Sequence[str]) -> bool:
    """Whether a required column has a null (the wire object lacked the field)."""
    return any(table.column(c).null_count for c in required)


def negative_size(table: pa.Table) -> int | None:
    """The first row whose ``size`` is negative (no file has a negative length), or None."""
    if not table.num_rows:
        return None
    bad = pc.fill_null(pc.less(table.column("size"), 0), False)
    if not pc.any(bad).as_py():
        return None
    return int(pc.indices_nonzero(bad)[0].as_py())


def dict_key(body: dict[str, Any], *, root: str) -> str:
    """The replay key of a decoded add/remove object; must agree with :func:`table_keys`."""
    path = file_key(body["path"], root=root)
    dv = body.get("deletionVector")
    if dv is None:
        return path
    offset = dv.get("offset")
    suffix = "" if offset is None else f"@{offset}"
    return f"{path}\x00{dv.get('storageType')}\x00{dv.get('pathOrInlineDv')}\x00{suffix}"


def path_keys(paths: pa.ChunkedArray | pa.Array, *, root: str) -> pa.Array:
    """The canonical key of every path (see :func:`file_key`), computing only the odd ones.

    Most paths in a log are plain relative paths and are their own key; only paths with an
    escape, a scheme, a leading ``/`` or a dot segment are resolved one by one.
    """
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks() if paths.num_chunks else pa.array([], pa.string())
    odd = pc.fill_null(pc.match_substring_regex(paths, PLAIN_PATH_NOT), False)
    if not pc.any(odd).as_py():
        return paths
    replaced = [file_key(p, root=root) for p in paths.filter(odd).to_pylist()]
    return pc.replace_with_mask(paths, odd, pa.array(replaced, pa.string()))


def table_keys(table: pa.Table, *, root: str) -> pa.ChunkedArray:
    """The replay key of every row of a state table."""
    path = pa.chunked_array([path_keys(table.column("path"), root=root)], pa.string())
    dv = table.column("deletion_vector")
    if dv.null_count == len(dv):
        return path
    offset = pc.struct_field(dv, "offset")
    suffix = pc.if_else(
        pc.is_valid(offset),
        pc.binary_join_element_wise("@", pc.cast(offset, pa.string()), ""),
        "",
    )
    joined = pc.binary_join_element_wise(
        path,
        pc.struct_field(dv, "storage_type"),
        pc.struct_field(dv, "path_or_inline_dv"),
        suffix,
        "\x00",
    )
    return pc.if_else(pc.is_valid(dv), joined, path)


def drop_keys(table: pa.Table, keys: pa.ChunkedArray | pa.Array, drop: pa.Array) -> pa.Table:
    """``table`` without the rows whose key is in ``drop`` (keys align with rows)."""
    if len(drop) == 0 or table.num_rows == 0:
        return table
    return table.filter(pc.invert(pc.is_in(keys, value_set=drop)))


def _dv(obj: dict[str, Any] | None) -> DeletionVectorDescriptor | None:
    if obj is None:
        return None
    return DeletionVectorDescriptor(
        storage_type=obj["storage_type"],
        path_or_inline_dv=obj["path_or_inline_dv"],
        offset=obj["offset"],
        size_in_bytes=obj["size_in_bytes"],
        cardinality=obj["cardinality"],
        max_row_index=obj["max_row_index"],
    )


def add_files_from_table(table: pa.Table) -> list[AddFile]:
    """Materialises state rows as :class:`AddFile` objects."""
    return [
        AddFile(
            path=r["path"],
            partition_values=r["partition_values"] or {},
            size=r["size"],
            modification_time=r["modification_time"],
            data_change=r["data_change"],
            stats=r["stats"],
            tags=r["tags"],
            deletion_vector=_dv(r["deletion_vector"]),
            base_row_id=r["base_row_id"],
            default_row_commit_version=r["default_row_commit_version"],
            clustering_provider=r["clustering_provider"],
        )
        for r in table.to_pylist(maps_as_pydicts="strict")
    ]


def file_summaries(table: pa.Table, *, partitioned: bool) -> list[FileSummary]:
    """Each state row's partition values and statistics: what file skipping reads.

    Args:
        table: Rows of a snapshot's file table.
        partitioned: Whether the table has partition columns; without, the (empty) partition
            values are not read, which is most of the cost.
    """
    stats = table.column("stats").to_pylist()
    if not partitioned:
        return [FileSummary({}, s) for s in stats]
    values = table.column("partition_values").to_pylist(maps_as_pydicts="strict")
    return [FileSummary(v or {}, s) for v, s in zip(values, stats, strict=True)]


def remove_files_from_table(table: pa.Table) -> list[RemoveFile]:
    """Materialises tombstone rows as :class:`RemoveFile` objects."""
    return [
        RemoveFile(
            path=r["path"],
            deletion_timestamp=r["deletion_timestamp"],
            data_change=r["data_change"],
            extended_file_metadata=r["extended_file_metadata"],
            partition_values=r["partition_values"],
            size=r["size"],
            deletion_vector=_dv(r["deletion_vector"]),
            base_row_id=r["base_row_id"],
            default_row_commit_version=r["default_row_commit_version"],
        )
        for r in table.to_pylist(maps_as_pydicts="strict")
    ]


def _to_wire(
    table: pa.Table, fields: Sequence[tuple[str, str, pa.DataType]], dv_type: pa.DataType
) -> pa.StructArray:
    arrays: list[pa.Array] = []
    out_fields: list[pa.Field] = []
    for s, w, t in fields:
        arr = table.column(s).combine_chunks()
        if t == DV_TYPE:
            wanted = DV_FIELDS[: dv_type.num_fields]
            sub = [_field(arr, name, ct, len(arr)) for name, _, ct in wanted]
            arr = pa.StructArray.from_arrays(sub, fields=list(dv_type), mask=arr.is_null())
            t = dv_type
        arrays.append(arr)
        out_fields.append(pa.field(w, t))
    return pa.StructArray.from_arrays(arrays, fields=out_fields)


def files_to_checkpoint(table: pa.Table) -> pa.StructArray:
    """Live files as a column of checkpoint ``add`` structs."""
    return _to_wire(table, ADD_FIELDS, DV_CHECKPOINT_TYPE)


def tombstones_to_checkpoint(table: pa.Table) -> pa.StructArray:
    """Tombstones as a column of checkpoint ``remove`` structs."""
    return _to_wire(table, REMOVE_FIELDS, DV_CHECKPOINT_TYPE)
