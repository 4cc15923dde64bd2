"""Spark schemas <-> Delta schemas, and the schema check every write runs.

Spark's schema JSON is the Delta ``schemaString`` format, so conversion goes through JSON; only
the types Delta cannot store (intervals, ``void``, ...) need attention, and CHAR/VARCHAR become
strings that remember their declared type in field metadata, as Delta stores them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltatx.errors import InvalidTableError, SchemaMismatchError
from deltatx.kernel.column_mapping import without_mapping
from deltatx.kernel.schema import (
    PRIMITIVE_TYPES,
    ArrayType,
    DataType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_schema,
)

CHAR_VARCHAR_METADATA_KEY = "__CHAR_VARCHAR_TYPE_STRING"
"""Field metadata key under which Delta keeps a CHAR(n)/VARCHAR(n) column's declared type."""

NOT_NULL_VIOLATION_MARKER = "DELTATX_NOT_NULL_VIOLATION"
"""Prefix of the runtime error raised when a NULL reaches a NOT NULL column."""

_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
_CHAR_VARCHAR = re.compile(r"^(char|varchar)\(\s*\d+\s*\)$")
_INTEGRAL_RANK = {"byte": 1, "short": 2, "integer": 3, "long": 4}


# --- conversion -------------------------------------------------------------------------------


def to_spark_schema(schema: StructType) -> T.StructType:
    """The Spark StructType for a Delta schema."""
    return T.StructType.fromJson(json.loads(schema.to_json()))


def from_spark_schema(schema: T.StructType) -> StructType:
    """The Delta schema for a Spark StructType.

    Raises:
        SchemaMismatchError: A column has a type Delta cannot store (the message names it).
    """
    obj = json.loads(schema.json())
    for field_obj in obj["fields"]:
        _normalize_field(field_obj, field_obj["name"])
    try:
        return without_mapping(parse_schema(json.dumps(obj)))
    except InvalidTableError as exc:  # pragma: no cover - _normalize_field names it first
        raise SchemaMismatchError(str(exc)) from None


def _normalize_field(field_obj: dict[str, Any], where: str) -> None:
    field_obj["type"] = _normalize_type(field_obj["type"], field_obj, where)


def _normalize_type(type_obj: Any, field_obj: dict[str, Any] | None, where: str) -> Any:
    if isinstance(type_obj, str):
        if _CHAR_VARCHAR.match(type_obj):
            if field_obj is not None:
                field_obj.setdefault("metadata", {})[CHAR_VARCHAR_METADATA_KEY] = type_obj
            return "string"
        # A void column is read (as NULLs) but never written: Parquet cannot store it.
        if type_obj != "void" and (
            type_obj in PRIMITIVE_TYPES or _DECIMAL.match(type_obj.replace(" ", ""))
        ):
            return type_obj
        raise SchemaMismatchError(
            f"Column '{where}' has type {type_obj}, which a Delta table cannot store; "
            f"cast it to a supported type (a NULL literal needs a cast, e.g. "
            f"lit(None).cast('string')).",
            column=where,
        )
    kind = type_obj.get("type")
    if kind == "struct":
        for f in type_obj["fields"]:
            _normalize_field(f, f"{where}.{f['name']}")
    elif kind == "array":
        type_obj["elementType"] = _normalize_type(type_obj["elementType"], None, where + "[]")
    elif kind == "map":
        type_obj["keyType"] = _normalize_type(type_obj["keyType"], None, where + ".key")
        type_obj["valueType"] = _normalize_type(type_obj["valueType"], None, where + ".value")
    else:
        raise SchemaMismatchError(
            f"Column '{where}' has type {kind}, which a Delta table cannot store.", column=where
        )
    return type_obj


# --- the write check --------------------------------------------------------------------------


def check_write_schema(
    table: StructType, data: StructType, *, merge_schema: bool
) -> StructType | None:
    """Checks that data with schema ``data`` may be written to a table with schema ``table``.

    Columns match by name, case-insensitively, in any order. A data column may have a type that
    converts to the table's type without loss (``int`` into a ``long`` column, ``float`` into
    ``double``, a decimal into a wider decimal); the write casts it. A table column never
    changes type: that needs Delta's type widening feature, which deltatx does not support.

    Args:
        table: The table's current schema.
        data: The schema of the data to write.
        merge_schema: Whether columns the table lacks are added to it (appended, nullable; also
            inside structs) instead of refused.

    Returns:
        The evolved table schema when ``merge_schema`` added columns, else None.

    Raises:
        SchemaMismatchError: A table column is missing from the data, the data has a column the
            table lacks (without ``merge_schema``), two data columns differ only in case, or a
            column's type does not fit; the message and ``column`` name the column.
    """
    return _merge_struct(table, data, prefix="", merge_schema=merge_schema, in_container=False)


def _merge_struct(
    table: StructType, data: StructType, *, prefix: str, merge_schema: bool, in_container: bool
) -> StructType | None:
    by_name: dict[str, StructField] = {}
    for f in data.fields:
        key = f.name.lower()
        if key in by_name:
            raise SchemaMismatchError(
                f"The data has two columns named '{prefix}{by_name[key].name}' and "
                f"'{prefix}{f.name}'; column names are case-insensitive.",
                column=prefix + f.name,
            )
        by_name[key] = f
    changed = False
    fields: list[StructField] = []
    for index, tf in enumerate(table.fields):
        name = prefix + tf.name
        df = by_name.pop(tf.name.lower(), None)
        if df is None:
            raise SchemaMismatchError(
                f"Column '{name}' of the table is missing from the data; add it to the data "
                f"(a NULL literal cast to {_type_name(tf.type)} will do).",
                column=name,
            )
        if in_container and data.fields[index].name.lower() != tf.name.lower():
            raise SchemaMismatchError(
                f"Struct field '{name}' inside an array or map is not in the table's position; "
                f"the data must list those fields in the table's order.",
                column=name,
            )
        new_type = _merge_type(
            tf.type, df.type, name=name, merge_schema=merge_schema, in_container=in_container
        )
        if new_type is not None:
            changed = True
            fields.append(StructField(tf.name, new_type, tf.nullable, tf.metadata))
        else:
            fields.append(tf)
    for df in data.fields:
        if df.name.lower() not in by_name:
            continue
        name = prefix + df.name
        if not merge_schema:
            raise SchemaMismatchError(
                f"Column '{name}' is in the data but not in the table; drop it from the data, or "
                f"pass merge_schema=True to add it to the table.",
                column=name,
            )
        changed = True
        fields.append(StructField(df.name, df.type, True, dict(df.metadata)))
    return StructType(tuple(fields)) if changed else None


def _merge_type(
    table: DataType, data: DataType, *, name: str, merge_schema: bool, in_container: bool
) -> DataType | None:
    if isinstance(table, StructType) and isinstance(data, StructType):
        return _merge_struct(
            table, data, prefix=name + ".", merge_schema=merge_schema, in_container=in_container
        )
    if isinstance(table, ArrayType) and isinstance(data, ArrayType):
        element = _merge_type(
            table.element_type,
            data.element_type,
            name=name + "[]",
            merge_schema=merge_schema,
            in_container=True,
        )
        return None if element is None else ArrayType(element, table.contains_null)
    if isinstance(table, MapType) and isinstance(data, MapType):
        key = _merge_type(
            table.key_type, data.key_type, name=name + ".key", merge_schema=False, in_container=True
        )
        value = _merge_type(
            table.value_type,
            data.value_type,
            name=name + ".value",
            merge_schema=merge_schema,
            in_container=True,
        )
        if key is None and value is None:
            return None
        return MapType(key or table.key_type, value or table.value_type, table.value_contains_null)
    if (
        isinstance(table, PrimitiveType)
        and isinstance(data, PrimitiveType)
        and (table.name == data.name or (not in_container and is_lossless_cast(data, table)))
    ):
        return None
    hint = (
        " Changing a column's type needs Delta's type widening feature, which deltatx does not "
        "support."
        if merge_schema
        else ""
    )
    raise SchemaMismatchError(
        f"Column '{name}' has type {_type_name(data)} in the data but {_type_name(table)} in the "
        f"table; cast it to {_type_name(table)}.{hint}",
        column=name,
    )


def is_lossless_cast(source: PrimitiveType, target: PrimitiveType) -> bool:
    """Whether every value of ``source`` converts to ``target`` exactly."""
    s, t = source.name, target.name
    if s in _INTEGRAL_RANK and t in _INTEGRAL_RANK:
        return _INTEGRAL_RANK[s] <= _INTEGRAL_RANK[t]
    if s == "float" and t == "double":
        return True
    if s in ("byte", "short", "integer") and t == "double":
        return True
    target_decimal = _DECIMAL.match(t)
    if target_decimal is None:
        return False
    tp, ts = int(target_decimal.group(1)), int(target_decimal.group(2))
    source_decimal = _DECIMAL.match(s)
    if source_decimal is not None:
        sp, ss = int(source_decimal.group(1)), int(source_decimal.group(2))
        return ts >= ss and tp - ts >= sp - ss
    digits = {"byte": 3, "short": 5, "integer": 10, "long": 20}.get(s)
    return digits is not None and tp - ts >= digits


def _type_name(t: DataType) -> str:
    if isinstance(t, PrimitiveType):
        return t.name
    if isinstance(t, ArrayType):
        return f"array<{_type_name(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{_type_name(t.key_type)},{_type_name(t.value_type)}>"
    return "struct<" + ",".join(f"{f.name}:{_type_name(f.type)}" for f in t.fields) + ">"


# --- conforming a DataFrame -------------------------------------------------------------------


def quote_column(name: str) -> str:
    """``name`` as a backquoted identifier, safe for dots, spaces and backquotes."""
    return "`" + name.replace("`", "``") + "`"


def conform_to_schema(df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` with exactly the columns of ``schema``: its names, order and types.

    The data must already have passed :func:`check_write_schema` against ``schema``. Structs are
    rebuilt field by field (Spark casts structs by position, not by name), lossless casts are
    applied, and a NULL in a NOT NULL top-level column fails the write on the executor with a
    message that starts with :data:`NOT_NULL_VIOLATION_MARKER` and names the column.
    A frame that already has them, with no NULL to check for, is returned as it is.
    """
    fields = from_spark_schema(df.schema).fields
    if _conforms(fields, schema):
        # The projection would change nothing, yet building it costs a round trip to the JVM
        # per column and one more analysis of the plan: 37 ms of a 600 ms append.
        return df
    by_name = {f.name.lower(): f for f in fields}
    columns: list[Column] = []
    for tf in schema.fields:
        source = by_name[tf.name.lower()]
        col = _conform(F.col(quote_column(source.name)), source.type, tf.type)
        if not tf.nullable:
            message = f"{NOT_NULL_VIOLATION_MARKER}: NULL value in NOT NULL column '{tf.name}'"
            col = F.when(col.isNull(), F.raise_error(F.lit(message))).otherwise(col)
        columns.append(col.alias(tf.name))
    return df.select(*columns)


def _conforms(fields: tuple[StructField, ...], schema: StructType) -> bool:
    """Whether columns ``fields`` are exactly ``schema``'s, with no NULL check to add.

    A NOT NULL column needs none when Spark knows its source cannot be NULL: Spark's optimizer
    would fold the check away (``IsNull`` of a non-nullable column is false).
    """
    return len(fields) == len(schema.fields) and all(
        source.name == target.name
        and (target.nullable or not source.nullable)
        and _same_type(source.type, target.type)
        for source, target in zip(fields, schema.fields, strict=True)
    )


def _conform(col: Column, source: DataType, target: DataType) -> Column:
    if isinstance(source, StructType) and isinstance(target, StructType):
        if [f.name for f in source.fields] == [f.name for f in target.fields] and all(
            _same_type(a.type, b.type) for a, b in zip(source.fields, target.fields, strict=True)
        ):
            return col
        by_name = {f.name.lower(): f for f in source.fields}
        parts = []
        for tf in target.fields:
            sf = by_name.get(tf.name.lower())
            if sf is None:  # a field merge_schema added elsewhere cannot be missing here
                parts.append(F.lit(None).cast(_spark_type(tf.type)).alias(tf.name))
            else:
                parts.append(_conform(col.getField(sf.name), sf.type, tf.type).alias(tf.name))
        # A NULL struct must stay NULL, not become a struct of NULLs.
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if _same_type(source, target):
        return col
    return col.cast(_spark_type(target))


def _same_type(a: DataType, b: DataType) -> bool:
    return _type_name(a) == _type_name(b)


def _spark_type(t: DataType) -> T.DataType:
    wrapper = StructType((StructField("x", t),))
    return to_spark_schema(wrapper).fields[0].dataType


def rename_columns(df: DataFrame, source: StructType, target: StructType) -> DataFrame:
    """``df`` with its leading columns (those of ``source``) renamed to ``target``'s, by position.

    Nested struct fields are renamed too (a struct cast pairs fields by position), and
    ``target``'s field metadata goes along, so Parquet field ids reach the writer. Columns past
    ``source``'s are kept as they are. This is how column mapping turns logical columns into
    physical ones and back; both schemas come from one table schema, so the types agree.
    """
    spark_target = to_spark_schema(target)
    renamed = [
        F.col(quote_column(s.name)).cast(t.dataType).alias(t.name, metadata=t.metadata)
        for s, t in zip(source.fields, spark_target.fields, strict=True)
    ]
    rest = [quote_column(name) for name in df.columns[len(source.fields) :]]
    return df.select(*renamed, *rest)
