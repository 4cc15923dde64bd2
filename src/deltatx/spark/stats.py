"""Per-file statistics from Parquet footers: numRecords, minValues, maxValues, nullCount.

Computed from the footers alone, never by scanning the data again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltatx.kernel.schema import DataType, PrimitiveType, StructType

# --- statistics from Parquet footers ----------------------------------------------------------
STRING_STATS_PREFIX = 32
"""Characters of a string kept in min/max statistics."""

_MAX_CHAR = "\U0010ffff"
# How many microseconds one unit of a Parquet timestamp is.
_MICROS_PER_UNIT = {"milliseconds": 1000, "microseconds": 1, "nanoseconds": 0}


def file_stats_json(
    metadata: pq.FileMetaData,
    data_schema: StructType,
    *,
    nan_columns: Collection[tuple[str, ...]] = (),
) -> str:
    """The ``stats`` JSON of a data file, from its Parquet footer alone.

    ``numRecords`` always; ``minValues``/``maxValues``/``nullCount`` for every primitive column
    (nested inside structs too) whose footer statistics are usable. Binary and variant
    columns, arrays and maps get no min/max. Bounds are never tighter than the data: strings
    are cut to 32 characters (a cut maximum ends with U+10FFFF so it stays an upper bound),
    timestamps are rounded outward to milliseconds.

    Args:
        metadata: The file's footer.
        data_schema: The schema of the columns stored in the file (physical names).
        nan_columns: Paths of floating point columns the writer saw a NaN in
            (:func:`nan_columns_of`): they get no bounds, as Spark's own writer gives them.
            pyarrow's footer bounds leave NaN out, yet Spark orders NaN above every number.
    """
    leaves = _leaf_columns(metadata)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    _collect_struct(metadata, leaves, data_schema, (), mins, maxs, nulls, set(nan_columns))
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    stats["minValues"] = mins
    stats["maxValues"] = maxs
    stats["nullCount"] = nulls
    return _to_json(stats)


def nan_columns_of(data: pa.Table) -> set[tuple[str, ...]]:
    """Paths of the floating point columns (nested in structs too) holding a NaN."""
    out: set[tuple[str, ...]] = set()

    def walk(array: pa.Array, path: tuple[str, ...]) -> None:
        if pa.types.is_floating(array.type):
            if pc.any(pc.is_nan(array)).as_py():
                out.add(path)
        elif pa.types.is_struct(array.type):
            for i in range(array.type.num_fields):
                walk(array.field(i), (*path, array.type.field(i).name))

    for name, column in zip(data.column_names, data.columns, strict=True):
        walk(column.combine_chunks(), (name,))
    return out


def _leaf_columns(metadata: pq.FileMetaData) -> dict[tuple[str, ...], int]:
    """Leaf column index by field path.

    Parquet numbers leaf columns depth-first; walking the schema tree (instead of splitting the
    dotted ``path`` strings) keeps a column named ``a.b`` apart from field ``b`` of struct ``a``.
    """
    schema = metadata.schema
    leaves: dict[tuple[str, ...], int] = {}
    counter = [0]

    def walk(arrow_type: pa.DataType, path: tuple[str, ...], in_container: bool) -> None:
        if pa.types.is_struct(arrow_type):
            for i in range(arrow_type.num_fields):
                child = arrow_type.field(i)
                walk(child.type, (*path, child.name), in_container)
        elif pa.types.is_map(arrow_type):
            walk(arrow_type.key_type, path, True)
            walk(arrow_type.item_type, path, True)
        elif (
            pa.types.is_list(arrow_type)
            or pa.types.is_large_list(arrow_type)
            or pa.types.is_fixed_size_list(arrow_type)
        ):
            walk(arrow_type.value_type, path, True)
        else:
            # Leaves inside arrays and maps only take up a number: they get no statistics.
            if not in_container:
                leaves[path] = counter[0]
            counter[0] += 1

    for arrow_field in schema.to_arrow_schema():
        walk(arrow_field.type, (arrow_field.name,), False)
    # Should the two numberings ever disagree, no statistics beat wrong ones.
    if counter[0] != len(schema) or any(
        schema.column(i).name != path[-1] for path, i in leaves.items()
    ):
        return {}
    return leaves


def _collect_struct(
    metadata: pq.FileMetaData,
    leaves: dict[tuple[str, ...], int],
    struct: StructType,
    prefix: tuple[str, ...],
    mins: dict[str, Any],
    maxs: dict[str, Any],
    nulls: dict[str, Any],
    unbounded: set[tuple[str, ...]],
) -> None:
    for field in struct.fields:
        path = (*prefix, field.name)
        if isinstance(field.type, StructType):
            sub_min: dict[str, Any] = {}
            sub_max: dict[str, Any] = {}
            sub_null: dict[str, Any] = {}
            _collect_struct(
                metadata, leaves, field.type, path, sub_min, sub_max, sub_null, unbounded
            )
            for target, sub in ((mins, sub_min), (maxs, sub_max), (nulls, sub_null)):
                if sub:
                    target[field.name] = sub
            continue
        if not isinstance(field.type, PrimitiveType):
            continue
        index = leaves.get(path)
        if index is None:
            continue
        low, high, null_count = _column_stats(metadata, index, field.type)
        if path in unbounded:
            low = high = None
        if null_count is not None:
            nulls[field.name] = null_count
        if low is not None and high is not None:
            mins[field.name] = low
            maxs[field.name] = high
        elif low is not None:
            mins[field.name] = low


def _column_stats(
    metadata: pq.FileMetaData, index: int, delta_type: DataType
) -> tuple[Any, Any, int | None]:
    """(min, max, nullCount) over all row groups; None where the footer does not tell."""
    assert isinstance(delta_type, PrimitiveType)
    type_name = delta_type.name
    null_count: int | None = 0
    low: Any = None
    high: Any = None
    bounds_known = type_name not in ("binary", "variant")
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        stats = group.column(index).statistics
        if stats is None or not stats.has_null_count:
            null_count = None
        elif null_count is not None:
            null_count += stats.null_count
        if not bounds_known:
            continue
        if stats is not None and stats.has_null_count and stats.null_count == group.num_rows:
            continue  # all NULL: no bounds to merge
        if stats is None or not stats.has_min_max:
            bounds_known = False
            continue
        g_low = _stat_value(stats, "min", type_name)
        g_high = _stat_value(stats, "max", type_name)
        if g_low is None or g_high is None:
            bounds_known = False
            continue
        low = g_low if low is None or g_low < low else low
        high = g_high if high is None or g_high > high else high
    if not bounds_known or low is None:
        return None, None, null_count
    return _render_min(low, type_name), _render_max(high, type_name), null_count


def _stat_value(stats: Any, which: str, type_name: str) -> Any:
    """A footer bound as a comparable Python value, or None when unusable."""
    raw = getattr(stats, which + "_raw")
    if type_name == "string":
        try:
            return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError:
            return None
    if type_name in ("timestamp", "timestamp_ntz"):
        unit = json.loads(stats.logical_type.to_json()).get("timeUnit")
        factor = _MICROS_PER_UNIT.get(unit)
        if not isinstance(raw, int) or factor is None:
            return None
        # Nanosecond files: keep nanoseconds, rounding happens on the millisecond level anyway.
        return ("ns", raw) if factor == 0 else ("us", raw * factor)
    value = getattr(stats, which)
    if type_name in ("float", "double"):
        return float(value) if math.isfinite(float(value)) else None
    if type_name.startswith("decimal"):
        return value if isinstance(value, Decimal) else None
    return value


def _render_min(value: Any, type_name: str) -> Any:
    if type_name == "string":
        return value[:STRING_STATS_PREFIX]
    return _render_common(value, type_name, floor=True)


def _render_max(value: Any, type_name: str) -> Any:
    if type_name == "string":
        if len(value) <= STRING_STATS_PREFIX:
            return value
        # prefix + U+10FFFF sorts after every string with that prefix, in UTF-8 byte order as
        # in code point order, unless the next character is U+10FFFF itself.
        if value[STRING_STATS_PREFIX] == _MAX_CHAR:
            return None
        return value[:STRING_STATS_PREFIX] + _MAX_CHAR
    return _render_common(value, type_name, floor=False)


def _render_common(value: Any, type_name: str, *, floor: bool) -> Any:
    if type_name in ("timestamp", "timestamp_ntz"):
        unit, raw = value
        per_ms = 1_000_000 if unit == "ns" else 1000
        millis = raw // per_ms if floor else -((-raw) // per_ms)
        moment = datetime(1970, 1, 1) + timedelta(milliseconds=millis)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
        return text + "Z" if type_name == "timestamp" else text
    if type_name == "date":
        return value.isoformat()
    return value


def _to_json(value: Any) -> str:
    """Compact JSON in which decimals stay exact numbers."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Decimal):
        return format(value, "f")
    return json.dumps(value)
