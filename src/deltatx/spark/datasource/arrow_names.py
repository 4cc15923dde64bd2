"""Arrow columns between logical and physical names, for the data source under column mapping.

pyarrow casts structs by field name, so renaming nested fields takes a positional rebuild;
Parquet field ids travel as ``PARQUET:field_id`` field metadata, which pyarrow's writer turns
into field ids and its reader exposes.
"""

from __future__ import annotations

import pyarrow as pa

from deltatx.kernel.column_mapping import PARQUET_FIELD_ID_KEY
from deltatx.kernel.schema import ArrayType, DataType, MapType, StructType

ARROW_FIELD_ID = b"PARQUET:field_id"


def renamed(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``array`` under ``target``, whose struct fields pair with ``array``'s by position.

    Both types must come from one table schema (one logical, one physical), so they differ
    in names and field metadata only.
    """
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([renamed(c, target) for c in array.chunks], type=target)
    if array.type == target:
        return array
    if pa.types.is_struct(target):
        assert isinstance(array, pa.StructArray)
        children = [renamed(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        assert isinstance(array, pa.ListArray | pa.LargeListArray)
        values = renamed(array.values, target.value_type)
        mask = array.is_null() if array.null_count else None
        return type(array).from_arrays(array.offsets, values, type=target, mask=mask)
    if pa.types.is_map(target):
        assert isinstance(array, pa.MapArray)
        keys = renamed(array.keys, target.key_type)
        items = renamed(array.items, target.item_type)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    return array.cast(target)


def with_field_ids(schema: pa.Schema, delta: StructType) -> pa.Schema:
    """``schema`` with each field's Parquet field id from the matching (physical) Delta field.

    ``delta`` is a physical schema whose fields carry ``parquet.field.id`` in id mode; fields
    without one are left as they are.
    """
    return pa.schema(
        [_field(f, d.type, d.metadata) for f, d in zip(schema, delta.fields, strict=True)]
    )


def _field(f: pa.Field, delta: DataType, metadata: dict[str, object]) -> pa.Field:
    out = f.with_type(_type(f.type, delta))
    field_id = metadata.get(PARQUET_FIELD_ID_KEY)
    if isinstance(field_id, int):
        out = out.with_metadata({ARROW_FIELD_ID: str(field_id).encode()})
    return out


def _type(t: pa.DataType, delta: DataType) -> pa.DataType:
    if pa.types.is_struct(t) and isinstance(delta, StructType):
        return pa.struct(
            [_field(t.field(i), d.type, d.metadata) for i, d in enumerate(delta.fields)]
        )
    if pa.types.is_list(t) and isinstance(delta, ArrayType):
        return pa.list_(t.value_field.with_type(_type(t.value_type, delta.element_type)))
    if pa.types.is_large_list(t) and isinstance(delta, ArrayType):
        return pa.large_list(t.value_field.with_type(_type(t.value_type, delta.element_type)))
    if pa.types.is_map(t) and isinstance(delta, MapType):
        return pa.map_(
            t.key_field.with_type(_type(t.key_type, delta.key_type)),
            t.item_field.with_type(_type(t.item_type, delta.value_type)),
        )
    return t


def field_id_names(schema: pa.Schema) -> dict[int, str]:
    """Top-level column names of a Parquet file by field id (files without ids give none)."""
    out: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(ARROW_FIELD_ID)
        if raw is not None and raw.isdigit():
            out[int(raw)] = f.name
    return out
