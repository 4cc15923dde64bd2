"""The target rows a MERGE's source keys match, joined on the driver with pyarrow.

A MERGE whose ON condition is key equalities alone, on integral or string columns of one type
on both sides, matches a target row exactly when each key equals a source row's key and none
is NULL: pyarrow's equality on those values is Spark's. The key columns of the candidate
files (already pruned by the source keys' range) are read as
:mod:`deltatx.log.row_level.arrow_matching` reads a condition's columns, and hash-joined with
the source keys, which the caller already holds on the driver.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode, physical_name
from deltatx.kernel.schema import StructType
from deltatx.kernel.values import Kind, kind_of_type
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.row_level.arrow_matching import (
    _ARROW_TYPES,
    DRIVER_MATCH_BYTES,
    _read_columns,
)
from deltatx.log.row_level.driver_threads import driver_pool
from deltatx.storage.location import Location

FILE = "file"
ROW = "row"
SOURCE_ROW = "source_row"
_KEY_KINDS = (Kind.INTEGRAL, Kind.STRING)


def key_kinds(schema: StructType, keys: Sequence[str]) -> list[Kind] | None:
    """The kind of each target key column, or None when one cannot be joined on the driver."""
    kinds: list[Kind] = []
    for name in keys:
        field = schema.get(name)
        kind = kind_of_type(field.type) if field is not None else None
        if kind not in _KEY_KINDS:
            return None
        assert kind is not None
        kinds.append(kind)
    return kinds


def key_matches(
    location: Location,
    files: Sequence[AddFile],
    schema: StructType,
    keys: Sequence[str],
    source_keys: Sequence[pa.Array],
    *,
    column_mapping: ColumnMappingMode | str,
) -> pa.Table | None:
    """(file, row, source_row) of every live target row whose keys equal a source row's.

    Args:
        location: The table's place on storage.
        files: The candidate files; ``file`` is an index into them.
        schema: The table's schema.
        keys: The target key columns, as the schema names them.
        source_keys: The source's values of each key, one array per key (same length); a
            source row is named by its position.
        column_mapping: The table's column mapping mode.

    Returns:
        The matched pairs, ``row`` being the physical row index in its file; None when the
        driver cannot decide (a key's kind or stored type, column mapping by id, or more
        than :data:`DRIVER_MATCH_BYTES` of files).

    Raises:
        InvalidTableError: A data file is missing (vacuumed) or is not readable Parquet.
    """
    kinds = key_kinds(schema, keys)
    if kinds is None or column_mapping == ColumnMappingMode.ID:
        return None
    if sum(f.size for f in files) > DRIVER_MATCH_BYTES:
        return None
    names = [f"k{i}" for i in range(len(keys))]
    source = pa.table(
        {
            **{
                n: pc.cast(a, _ARROW_TYPES[k], safe=True)
                for n, a, k in zip(names, source_keys, kinds, strict=True)
            },
            SOURCE_ROW: pa.array(np.arange(len(source_keys[0]), dtype=np.int64)),
        }
    )
    # A NULL key equals nothing, in Spark's join as here.
    source = source.filter(_all_valid(source, names))
    empty = pa.table(
        {FILE: pa.array([], pa.int64()), ROW: pa.array([], pa.int64()), SOURCE_ROW: []},
        schema=pa.schema([(FILE, pa.int64()), (ROW, pa.int64()), (SOURCE_ROW, pa.int64())]),
    )
    if not source.num_rows or not files:
        return empty
    by_name = {k.lower(): kind for k, kind in zip(keys, kinds, strict=True)}
    physical = {}
    for k in keys:
        field = schema.get(k)
        assert field is not None
        physical[k.lower()] = physical_name(field)
    reader = DvReader(location)

    def join(index: int) -> pa.Table | None:
        f = files[index]
        read = _read_columns(location, f, by_name, physical)
        if read is None:
            return None
        table = pa.table(
            {
                **{n: read.columns[k.lower()] for n, k in zip(names, keys, strict=True)},
                ROW: pa.array(np.arange(read.rows, dtype=np.int64)),
            }
        )
        gone = np.asarray(reader.rows(f.deletion_vector, data_file=f.path), dtype=np.int64)
        live = _all_valid(table, names)
        if len(gone):
            live = pc.and_(live, pa.array(~np.isin(np.arange(read.rows), gone)))
        probe = table.filter(live)
        hits = probe.join(
            _in_range(source, probe, names), keys=names, join_type="inner", use_threads=False
        )
        return pa.table(
            {
                FILE: pa.array(np.full(hits.num_rows, index, dtype=np.int64)),
                ROW: hits.column(ROW),
                SOURCE_ROW: hits.column(SOURCE_ROW),
            }
        )

    found = list(driver_pool().map(join, range(len(files))))
    if any(t is None for t in found):
        return None
    return pa.concat_tables([empty, *(t for t in found if t is not None)])


def _in_range(source: pa.Table, probe: pa.Table, names: Sequence[str]) -> pa.Table:
    """The source rows whose every key lies within the range of the probe's (non-NULL) keys.

    The join hashes its right side once per file: a source of 100,000 rows hashed for each of
    100 files cost ten times the join of each file with the few source rows its keys can
    meet, which is all a sorted or clustered target's file can. A key outside a file's range
    equals none of its keys (strings compare by bytes, as they are equal by bytes).
    """
    keep: pa.Array | None = None
    for name in names:
        low, high = pc.min_max(probe.column(name)).values()
        if not low.is_valid:
            return source.slice(0, 0)
        column = source.column(name)
        inside = pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high))
        keep = inside if keep is None else pc.and_(keep, inside)
    assert keep is not None
    return source.filter(keep)


def _all_valid(table: pa.Table, names: Sequence[str]) -> pa.Array:
    valid = pc.is_valid(table.column(names[0]))
    for n in names[1:]:
        valid = pc.and_(valid, pc.is_valid(table.column(n)))
    return valid
