"""Column mapping: logical column names as users see them, physical names as files store them.

With ``delta.columnMapping.mode`` set to ``name`` or ``id``, every field of the schema carries a
column id and a physical name in its metadata; data files, statistics and partition values use
the physical names, so renaming or dropping a column is a metadata-only change. In ``id`` mode
Parquet field ids identify the columns of a data file as well.

Every conversion between the two spellings lives here: :func:`physical_schema` (logical ->
physical) and the schema itself for the reverse direction (readers rename physical columns
positionally back to the logical schema).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum

from deltatx.errors import InvalidPropertyError, InvalidTableError, SchemaMismatchError
from deltatx.kernel.actions import Metadata
from deltatx.kernel.schema import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
    parse_schema,
)

MODE_KEY = "delta.columnMapping.mode"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
PARQUET_FIELD_ID_KEY = "parquet.field.id"
"""Field metadata key Spark turns into (and reads back from) a Parquet field id."""

FEATURE = "columnMapping"
MAPPING_METADATA_KEYS: tuple[str, ...] = (ID_KEY, PHYSICAL_NAME_KEY, PARQUET_FIELD_ID_KEY)
"""Field metadata that describes one table's mapping, never carried from data to a table."""


class ColumnMappingMode(StrEnum):
    """``delta.columnMapping.mode``: how logical column names map to physical ones."""

    NONE = "none"
    ID = "id"
    NAME = "name"


def mode_of(configuration: Mapping[str, str]) -> ColumnMappingMode | str:
    """The mode a table configuration declares; an unknown spelling is returned as text."""
    text = configuration.get(MODE_KEY, "none").strip().lower()
    try:
        return ColumnMappingMode(text)
    except ValueError:
        return text


def parse_mode(value: str) -> ColumnMappingMode:
    """Parses a mode being set.

    Raises:
        ValueError: The value is not ``none``, ``name`` or ``id``.
    """
    try:
        return ColumnMappingMode(value.strip().lower())
    except ValueError:
        allowed = ", ".join(f"'{m.value}'" for m in ColumnMappingMode)
        raise ValueError(f"'{value}' is not a column mapping mode; allowed: {allowed}") from None


def is_mapped(mode: ColumnMappingMode | str) -> bool:
    """Whether files use physical names (any mode but ``none``)."""
    return mode != ColumnMappingMode.NONE


# --- the mode and its changes -----------------------------------------------------------------


def check_mode_change(
    old: ColumnMappingMode | str | None, new: ColumnMappingMode | str, *, table: str
) -> None:
    """Refuses a change of mode that existing data files cannot follow.

    Turning mapping on with ``name`` keeps every file readable (physical names start as the
    current names); ``id`` needs Parquet field ids that existing files lack, and turning mapping
    off or switching modes would make files unreadable under their physical names.

    Args:
        old: The mode of the table before the change; None for a table being created.
        new: The mode requested.
        table: The table, named in messages.

    Raises:
        InvalidPropertyError: The change is one of the refused ones.
    """
    if old is None or old == new:
        return
    if old == ColumnMappingMode.NONE and new == ColumnMappingMode.NAME:
        return
    if old == ColumnMappingMode.NONE:
        why = (
            "id mode needs Parquet field ids, which the existing data files lack; enable 'name' "
            "mode instead, or create a new table with 'id'"
        )
    elif new == ColumnMappingMode.NONE:
        why = "turning column mapping off would leave the data files under physical names"
    else:
        why = f"switching from '{old}' to '{new}' would change how every data file is resolved"
    raise InvalidPropertyError(
        f"{table}: cannot change {MODE_KEY} from '{old}' to '{new}': {why}. Nothing was committed.",
        key=MODE_KEY,
    )


# --- assigning ids and physical names ---------------------------------------------------------


def max_column_id(configuration: Mapping[str, str]) -> int:
    """``delta.columnMapping.maxColumnId``, 0 when absent or unreadable."""
    try:
        return int(configuration.get(MAX_COLUMN_ID_KEY, "0"))
    except ValueError:
        return 0


def assign_mapping(schema: StructType, *, max_id: int, keep_names: bool) -> tuple[StructType, int]:
    """Gives every field (nested ones too) lacking an id or physical name one.

    Args:
        schema: The logical schema.
        max_id: The highest id already handed out; new ids count up from it.
        keep_names: Whether a new physical name is the field's current name (turning mapping on
            for a table whose files use those names) rather than a fresh unique one.

    Returns:
        The schema with the metadata filled in, and the new highest id.
    """
    counter = [max(max_id, _highest_id(schema))]

    def struct(s: StructType) -> StructType:
        return StructType(tuple(field(f) for f in s.fields))

    def field(f: StructField) -> StructField:
        meta = dict(f.metadata)
        if not isinstance(meta.get(ID_KEY), int):
            counter[0] += 1
            meta[ID_KEY] = counter[0]
        if not isinstance(meta.get(PHYSICAL_NAME_KEY), str):
            meta[PHYSICAL_NAME_KEY] = f.name if keep_names else f"col-{uuid.uuid4()}"
        return StructField(f.name, _with_structs(f.type, struct), f.nullable, meta)

    result = struct(schema)
    return result, counter[0]


def _highest_id(schema: StructType) -> int:
    return max(
        (i for f in _all_fields(schema) if isinstance(i := f.metadata.get(ID_KEY), int)), default=0
    )


def _all_fields(t: DataType) -> Iterable[StructField]:
    if isinstance(t, StructType):
        for f in t.fields:
            yield f
            yield from _all_fields(f.type)
    elif isinstance(t, ArrayType):
        yield from _all_fields(t.element_type)
    elif isinstance(t, MapType):
        yield from _all_fields(t.key_type)
        yield from _all_fields(t.value_type)


def check_mapping(schema: StructType, configuration: Mapping[str, str]) -> None:
    """Checks that a column-mapped schema is complete: the rule every committed one obeys.

    Raises:
        InvalidTableError: A field lacks an id or physical name, two fields share an id, two
            sibling fields share a physical name, or an id exceeds ``maxColumnId``.
    """
    highest = max_column_id(configuration)
    ids: dict[int, str] = {}

    def walk(t: DataType, prefix: str) -> None:
        if isinstance(t, StructType):
            siblings: set[str] = set()
            for f in t.fields:
                path = prefix + f.name
                column_id = f.metadata.get(ID_KEY)
                physical = f.metadata.get(PHYSICAL_NAME_KEY)
                if not isinstance(column_id, int) or not isinstance(physical, str) or not physical:
                    raise InvalidTableError(
                        f"column '{path}' lacks {ID_KEY} or {PHYSICAL_NAME_KEY}, which column "
                        "mapping requires of every column"
                    )
                if column_id in ids:
                    raise InvalidTableError(
                        f"columns '{ids[column_id]}' and '{path}' share column id {column_id}"
                    )
                if column_id > highest:
                    raise InvalidTableError(
                        f"column '{path}' has id {column_id}, above {MAX_COLUMN_ID_KEY}={highest}"
                    )
                if physical.lower() in siblings:
                    raise InvalidTableError(
                        f"two columns beside '{path}' share physical name {physical!r}"
                    )
                siblings.add(physical.lower())
                ids[column_id] = path
                walk(f.type, path + ".")
        elif isinstance(t, ArrayType):
            walk(t.element_type, prefix)
        elif isinstance(t, MapType):
            walk(t.key_type, prefix)
            walk(t.value_type, prefix)

    walk(schema, "")


def mapped_metadata(
    metadata: Metadata, previous: Metadata | None, *, table: str, replacing: bool = False
) -> Metadata:
    """Metadata being staged, with column mapping applied to its schema.

    Every column lacking an id and physical name gets one and ``maxColumnId`` follows; when the
    change turns mapping on for an existing table, physical names start as the current names,
    so existing files stay readable. Without mapping the metadata is returned as it is.

    Args:
        metadata: The metadata to stage.
        previous: The committed metadata the change starts from; None for a new table.
        table: The table, named in messages.
        replacing: Whether the change replaces the whole table (no old file stays), so any
            mode may follow any other.

    Raises:
        InvalidPropertyError: The mode change is one existing files cannot follow.
    """
    new_mode = mode_of(metadata.configuration)
    old_mode = None if previous is None or replacing else mode_of(previous.configuration)
    if not isinstance(new_mode, ColumnMappingMode):
        return metadata  # the commit rules refuse an unknown mode, naming it
    check_mode_change(old_mode, new_mode, table=table)
    if not is_mapped(new_mode):
        return metadata
    schema = parse_schema(metadata.schema_string)
    conf = dict(metadata.configuration)
    if previous is not None:
        # Ids are never reused, not even by a replaced table (old snapshots still use them).
        floor = max_column_id(previous.configuration)
        conf[MAX_COLUMN_ID_KEY] = str(max(floor, max_column_id(conf)))
    assigned, highest = assign_mapping(
        schema, max_id=max_column_id(conf), keep_names=old_mode == ColumnMappingMode.NONE
    )
    if assigned == schema and metadata.configuration.get(MAX_COLUMN_ID_KEY) == str(highest):
        return metadata
    return replace(
        metadata,
        schema_string=assigned.to_json(),
        configuration={**conf, MAX_COLUMN_ID_KEY: str(highest)},
    )


def without_mapping(schema: StructType) -> StructType:
    """``schema`` without any column ids, physical names or Parquet field ids.

    A DataFrame's schema may carry those of the table it was read from; a table assigns its
    own when it stores a schema.
    """

    def struct(s: StructType) -> StructType:
        return StructType(
            tuple(
                StructField(
                    f.name,
                    _with_structs(f.type, struct),
                    f.nullable,
                    {k: v for k, v in f.metadata.items() if k not in MAPPING_METADATA_KEYS},
                )
                for f in s.fields
            )
        )

    return struct(schema)


def _with_structs(t: DataType, struct: Callable[[StructType], StructType]) -> DataType:
    """``t`` with ``struct`` applied to every struct inside it, through arrays and maps."""
    if isinstance(t, StructType):
        return struct(t)
    if isinstance(t, ArrayType):
        return ArrayType(_with_structs(t.element_type, struct), t.contains_null)
    if isinstance(t, MapType):
        return MapType(
            _with_structs(t.key_type, struct),
            _with_structs(t.value_type, struct),
            t.value_contains_null,
        )
    return t


# --- logical -> physical ----------------------------------------------------------------------


def physical_name(f: StructField) -> str:
    """The name a field has in data files (its logical name without mapping metadata)."""
    physical = f.metadata.get(PHYSICAL_NAME_KEY)
    return physical if isinstance(physical, str) and physical else f.name


def physical_schema(schema: StructType, mode: ColumnMappingMode | str) -> StructType:
    """The schema as data files store it: physical names, and Parquet field ids in id mode.

    Field metadata other than the field id is dropped: files carry no logical knowledge. With
    mode ``none`` the schema is returned unchanged.
    """
    if not is_mapped(mode):
        return schema
    with_ids = mode == ColumnMappingMode.ID

    def struct(s: StructType) -> StructType:
        fields = []
        for f in s.fields:
            meta: dict[str, object] = {}
            if with_ids and isinstance(f.metadata.get(ID_KEY), int):
                meta[PARQUET_FIELD_ID_KEY] = f.metadata[ID_KEY]
            fields.append(
                StructField(physical_name(f), _with_structs(f.type, struct), f.nullable, meta)
            )
        return StructType(tuple(fields))

    return struct(schema)


def physical_columns(schema: StructType, columns: Sequence[str]) -> list[str]:
    """Top-level logical column names as files, statistics and partition values spell them.

    A name the schema lacks is kept as it is (callers refuse unknown columns themselves).
    """
    out = []
    for name in columns:
        f = schema.get(name)
        out.append(physical_name(f) if f is not None else name)
    return out


# --- schema changes that need mapping ---------------------------------------------------------


def renamed(schema: StructType, old: str, new: str) -> StructType:
    """The schema with top-level column ``old`` called ``new``; its id and physical name stay.

    Raises:
        SchemaMismatchError: ``old`` is not a column, ``new`` is empty or already taken.
    """
    f = _existing(schema, old)
    if not new or not new.strip():
        raise SchemaMismatchError("a column's new name must not be empty", column=old)
    other = schema.get(new)
    if other is not None and other is not f:
        raise SchemaMismatchError(
            f"cannot rename '{f.name}' to '{new}': the table already has a column '{other.name}'",
            column=new,
        )
    if _INVALID_NAME.search(new):
        raise SchemaMismatchError(
            f"cannot rename '{f.name}' to {new!r}: a column name cannot hold a newline or tab",
            column=new,
        )
    return StructType(
        tuple(
            StructField(new, g.type, g.nullable, g.metadata) if g is f else g for g in schema.fields
        )
    )


_INVALID_NAME = re.compile(r"[\n\t\r]")


def dropped(schema: StructType, names: Sequence[str]) -> StructType:
    """The schema without top-level columns ``names``.

    Raises:
        SchemaMismatchError: A name is not a column, is given twice, or every column would go.
    """
    if not names:
        raise SchemaMismatchError("name at least one column to drop")
    doomed: list[StructField] = []
    for name in names:
        f = _existing(schema, name)
        if any(d is f for d in doomed):
            raise SchemaMismatchError(f"column '{f.name}' is named twice", column=f.name)
        doomed.append(f)
    kept = tuple(f for f in schema.fields if not any(d is f for d in doomed))
    if not kept:
        raise SchemaMismatchError("cannot drop every column of a table")
    return StructType(kept)


def _existing(schema: StructType, name: str) -> StructField:
    f = schema.get(name)
    if f is None:
        known = ", ".join(schema.field_names())
        raise SchemaMismatchError(
            f"column '{name}' is not in the table (columns: {known})", column=name
        )
    return f
