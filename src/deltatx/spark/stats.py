"""Per-file statistics from Parquet footers: numRecords, minValues, maxValues, nullCount.

Computed from the footers alone, never by scanning the data again. Floating point columns are
the exception: pyarrow leaves NaN out of a footer's min/max, while Spark orders NaN above every
number and trusts those bounds when it pushes a filter into the Parquet reader (``v > 1e300``
would skip the row group holding a NaN). So the files deltatx writes with pyarrow
(:class:`~deltatx.spark.data_file_writer.DataFileWriter`) carry no footer statistics for
floating point leaves; their statistics are gathered from the data as it is written and
travel in the footer's key-value metadata (:data:`FLOAT_STATS_KEY`), where
:func:`file_stats_json` finds them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
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


def file_stats_json(metadata: pq.FileMetaData, data_schema: StructType) -> str:
    """The ``stats`` JSON of a data file, from its Parquet footer alone.

    ``numRecords`` always; ``minValues``/``maxValues``/``nullCount`` for every primitive column
    (nested inside structs too) whose footer statistics are usable. Binary and variant
    columns, arrays and maps get no min/max. Bounds are never tighter than the data: strings
    are cut to 32 characters (a cut maximum ends with U+10FFFF so it stays an upper bound),
    timestamps are rounded outward to milliseconds.

    Args:
        metadata: The file's footer.
        data_schema: The schema of the columns stored in the file (physical names).

    Floating point columns the writer gathered statistics for (:data:`FLOAT_STATS_KEY`) take
    them from there: a column holding a NaN gets no bounds, as Spark's own writer gives it.
    """
    leaves = _leaf_columns(metadata)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    floats = _written_float_stats(metadata)
    _collect_struct(metadata, leaves, data_schema, (), mins, maxs, nulls, floats)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    stats["minValues"] = mins
    stats["maxValues"] = maxs
    stats["nullCount"] = nulls
    return _to_json(stats)


# --- statistics of floating point leaves, gathered from the data as it is written -------------
FLOAT_STATS_KEY = "deltatx.floatStats"
"""The footer key-value entry that holds the statistics of a file's floating point leaves."""

_FLOAT_TYPES = frozenset({"float", "double"})

LeafPath = tuple[str, ...]
"""A leaf column by the names from its top-level column down through structs."""


@dataclass(frozen=True, slots=True)
class FloatLeafStats:
    """What the log's statistics need of one floating point leaf, gathered from its values.

    Attributes:
        null_count: NULL values; a NULL parent struct makes its fields NULL, as in a footer.
        low: The smallest value that is not NaN; None while there is none.
        high: The largest value that is not NaN; None while there is none.
        nan: Whether a NaN was seen.
    """

    null_count: int = 0
    low: float | None = None
    high: float | None = None
    nan: bool = False

    def merged(self, other: FloatLeafStats) -> FloatLeafStats:
        """The statistics of both sets of values together."""
        return FloatLeafStats(
            null_count=self.null_count + other.null_count,
            low=_least(self.low, other.low),
            high=_greatest(self.high, other.high),
            nan=self.nan or other.nan,
        )

    def bounds(self) -> tuple[float | None, float | None]:
        """``(min, max)`` for the log, ``(None, None)`` where there must be none.

        A NaN leaves no bounds (Spark orders it above every number), as Spark's own writer
        does; so do infinities (JSON has none) and all-NULL values. Zeros are bounded as a
        Parquet footer bounds them: a minimum of zero is -0.0, a maximum of zero is +0.0.
        """
        low, high = self.low, self.high
        if self.nan or low is None or high is None:
            return None, None
        if not (math.isfinite(low) and math.isfinite(high)):
            return None, None
        return (-0.0 if low == 0 else low), (0.0 if high == 0 else high)


def float_leaf_paths(schema: pa.Schema) -> list[LeafPath]:
    """Paths of the floating point leaves of ``schema`` outside lists and maps."""
    out: list[LeafPath] = []

    def walk(arrow_type: pa.DataType, path: LeafPath) -> None:
        if pa.types.is_floating(arrow_type):
            out.append(path)
        elif pa.types.is_struct(arrow_type):
            for child in arrow_type:
                walk(child.type, (*path, child.name))

    for arrow_field in schema:
        walk(arrow_field.type, (arrow_field.name,))
    return out


def float_leaf_stats(
    table: pa.Table, *, nan_known: Collection[LeafPath] = ()
) -> dict[LeafPath, FloatLeafStats]:
    """The statistics of each floating point leaf of ``table`` (outside lists and maps).

    Vectorised: a few passes over each leaf, no Python work per row.

    Args:
        table: The rows.
        nan_known: Leaves already known to hold a NaN (their bounds are lost anyway): only
            their NULLs are counted.
    """
    out: dict[LeafPath, FloatLeafStats] = {}
    for path, values in _float_leaves(table):
        if path in nan_known:
            out[path] = FloatLeafStats(null_count=values.null_count, nan=True)
            continue
        # min_max skips NULL and NaN, and gives NaN only when every value is one.
        extremes = pc.min_max(values)
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if low is not None and math.isnan(low):
            low = high = None
        out[path] = FloatLeafStats(
            null_count=values.null_count,
            low=low,
            high=high,
            nan=pc.any(pc.is_nan(values)).as_py() is True,
        )
    return out


def float_stats_metadata(stats: Mapping[LeafPath, FloatLeafStats]) -> dict[str, str]:
    """The footer key-value entry carrying ``stats`` (read back by :func:`file_stats_json`)."""
    entries = [[list(p), s.null_count, s.low, s.high, s.nan] for p, s in stats.items()]
    # Python's JSON keeps infinities (as Infinity); NaN never reaches a bound.
    return {FLOAT_STATS_KEY: json.dumps(entries)}


def _written_float_stats(metadata: pq.FileMetaData) -> dict[LeafPath, FloatLeafStats]:
    raw = (metadata.metadata or {}).get(FLOAT_STATS_KEY.encode())
    if raw is None:
        return {}
    try:
        return {
            tuple(path): FloatLeafStats(null_count=int(nulls), low=low, high=high, nan=bool(nan))
            for path, nulls, low, high, nan in json.loads(raw)
        }
    except (TypeError, ValueError):
        return {}  # unreadable: the footer's own statistics (none for floats) stand


def _float_leaves(table: pa.Table) -> Iterator[tuple[LeafPath, pa.ChunkedArray]]:
    def walk(values: pa.ChunkedArray, path: LeafPath) -> Iterator[tuple[LeafPath, pa.ChunkedArray]]:
        if pa.types.is_floating(values.type):
            yield path, values
        elif pa.types.is_struct(values.type):
            # flatten() folds the struct's own NULLs into each field, as a Parquet leaf has them.
            for child, child_values in zip(values.type, values.flatten(), strict=True):
                yield from walk(child_values, (*path, child.name))

    for name, column in zip(table.column_names, table.columns, strict=True):
        yield from walk(column, (name,))


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _greatest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


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
    floats: dict[tuple[str, ...], FloatLeafStats],
) -> None:
    for field in struct.fields:
        path = (*prefix, field.name)
        if isinstance(field.type, StructType):
            sub_min: dict[str, Any] = {}
            sub_max: dict[str, Any] = {}
            sub_null: dict[str, Any] = {}
            _collect_struct(metadata, leaves, field.type, path, sub_min, sub_max, sub_null, floats)
            for target, sub in ((mins, sub_min), (maxs, sub_max), (nulls, sub_null)):
                if sub:
                    target[field.name] = sub
            continue
        if not isinstance(field.type, PrimitiveType):
            continue
        index = leaves.get(path)
        if index is None:
            continue
        written = floats.get(path) if field.type.name in _FLOAT_TYPES else None
        column: tuple[Any, Any, int | None] = (
            (*written.bounds(), written.null_count)
            if written is not None
            else _column_stats(metadata, index, field.type)
        )
        low, high, null_count = column
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
