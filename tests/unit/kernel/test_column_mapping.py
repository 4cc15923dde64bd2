"""Column mapping: ids and physical names, the physical schema, mode changes, rename and drop."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import InvalidPropertyError, InvalidTableError, SchemaMismatchError
from deltatx.kernel.actions import AddFile, Metadata, ProtocolAction
from deltatx.kernel.column_mapping import (
    ID_KEY,
    MAX_COLUMN_ID_KEY,
    PARQUET_FIELD_ID_KEY,
    PHYSICAL_NAME_KEY,
    ColumnMappingMode,
    assign_mapping,
    check_mapping,
    check_mode_change,
    dropped,
    mapped_metadata,
    physical_columns,
    physical_schema,
    renamed,
    without_mapping,
)
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal
from deltatx.kernel.schema import (
    ArrayType,
    DataType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_schema,
)
from deltatx.kernel.table_configuration import TableConfiguration

NAME = ColumnMappingMode.NAME
ID = ColumnMappingMode.ID
NONE = ColumnMappingMode.NONE


def plain(*names: str) -> StructType:
    return StructType(tuple(StructField(n, PrimitiveType("long")) for n in names))


NESTED = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField(
            "s",
            StructType(
                (
                    StructField("a", PrimitiveType("integer")),
                    StructField("b", PrimitiveType("string")),
                )
            ),
        ),
        StructField(
            "xs",
            ArrayType(StructType((StructField("x", PrimitiveType("double")),))),
        ),
    )
)


def metadata(schema: StructType, partitions: tuple[str, ...] = (), **conf: str) -> Metadata:
    return Metadata("t", schema.to_json(), partitions, dict(conf))


# --- assigning ------------------------------------------------------------------------------


def test_every_field_nested_ones_too_gets_a_fresh_id_and_a_unique_physical_name() -> None:
    schema, highest = assign_mapping(NESTED, max_id=0, keep_names=False)
    fields = _walk(schema)
    assert [f.metadata[ID_KEY] for f in fields] == list(range(1, 7))
    assert highest == 6
    physical = [f.metadata[PHYSICAL_NAME_KEY] for f in fields]
    assert len(set(physical)) == len(physical)
    assert all(p.startswith("col-") for p in physical)
    check_mapping(schema, {MAX_COLUMN_ID_KEY: "6"})


def test_existing_ids_and_names_stay_and_new_ids_count_up_from_the_maximum() -> None:
    first, highest = assign_mapping(plain("a", "b"), max_id=10, keep_names=True)
    assert [f.metadata[ID_KEY] for f in first.fields] == [11, 12]
    assert [f.metadata[PHYSICAL_NAME_KEY] for f in first.fields] == ["a", "b"]
    grown = StructType((*first.fields, StructField("c", PrimitiveType("long"))))
    again, highest = assign_mapping(grown, max_id=highest, keep_names=False)
    assert again.fields[:2] == first.fields
    assert again.fields[2].metadata[ID_KEY] == 13 and highest == 13


@pytest.mark.parametrize(
    ("fields", "conf", "message"),
    [
        ([("a", {ID_KEY: 1})], {MAX_COLUMN_ID_KEY: "1"}, "lacks"),
        ([("a", {PHYSICAL_NAME_KEY: "p"})], {MAX_COLUMN_ID_KEY: "1"}, "lacks"),
        (
            [
                ("a", {ID_KEY: 1, PHYSICAL_NAME_KEY: "p"}),
                ("b", {ID_KEY: 1, PHYSICAL_NAME_KEY: "q"}),
            ],
            {MAX_COLUMN_ID_KEY: "2"},
            "share column id 1",
        ),
        (
            [
                ("a", {ID_KEY: 1, PHYSICAL_NAME_KEY: "p"}),
                ("b", {ID_KEY: 2, PHYSICAL_NAME_KEY: "P"}),
            ],
            {MAX_COLUMN_ID_KEY: "2"},
            "share physical name",
        ),
        ([("a", {ID_KEY: 5, PHYSICAL_NAME_KEY: "p"})], {MAX_COLUMN_ID_KEY: "4"}, "above"),
    ],
)
def test_an_incomplete_or_inconsistent_mapping_is_refused(
    fields: list[tuple[str, dict[str, object]]], conf: dict[str, str], message: str
) -> None:
    schema = StructType(tuple(StructField(n, PrimitiveType("long"), True, m) for n, m in fields))
    with pytest.raises(InvalidTableError, match=message):
        check_mapping(schema, conf)


# --- logical -> physical ------------------------------------------------------------------------


def test_the_physical_schema_renames_every_level_and_carries_field_ids_in_id_mode() -> None:
    mapped, _ = assign_mapping(NESTED, max_id=0, keep_names=False)
    by_name = physical_schema(mapped, NAME)
    by_id = physical_schema(mapped, ID)
    logical = _walk(mapped)
    for physical in (by_name, by_id):
        assert [f.name for f in _walk(physical)] == [f.metadata[PHYSICAL_NAME_KEY] for f in logical]
    assert all(f.metadata == {} for f in _walk(by_name))
    assert [f.metadata[PARQUET_FIELD_ID_KEY] for f in _walk(by_id)] == [
        f.metadata[ID_KEY] for f in logical
    ]
    assert physical_schema(mapped, NONE) is mapped


def test_partition_columns_are_spelt_physically() -> None:
    mapped, _ = assign_mapping(plain("a", "Day"), max_id=0, keep_names=False)
    day = mapped.fields[1].metadata[PHYSICAL_NAME_KEY]
    assert physical_columns(mapped, ["day"]) == [day]
    config = TableConfiguration.of(
        ProtocolAction(2, 5),
        metadata(mapped, ("Day",), **{"delta.columnMapping.mode": "name", MAX_COLUMN_ID_KEY: "2"}),
    )
    assert config.column_mapping
    assert config.physical_partition_columns == (day,)
    assert config.physical_schema.field_names() == physical_columns(mapped, ["a", "Day"])


def _schemas() -> st.SearchStrategy[StructType]:
    names = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
    leaf: st.SearchStrategy[DataType] = st.sampled_from(
        [PrimitiveType("long"), PrimitiveType("string"), PrimitiveType("date")]
    )

    def structs(children: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
        fields = st.lists(
            st.tuples(names, children), min_size=1, max_size=4, unique_by=lambda t: t[0]
        )
        return st.one_of(
            fields.map(lambda fs: StructType(tuple(StructField(n, t) for n, t in fs))),
            children.map(ArrayType),
            st.tuples(leaf, children).map(lambda kv: MapType(kv[0], kv[1])),
        )

    top = st.lists(
        st.tuples(names, st.recursive(leaf, structs, max_leaves=8)),
        min_size=1,
        max_size=5,
        unique_by=lambda t: t[0].lower(),
    )
    return top.map(lambda fs: StructType(tuple(StructField(n, t) for n, t in fs)))


@settings(max_examples=60, deadline=None)
@given(schema=_schemas(), keep=st.booleans())
def test_assigned_mappings_are_complete_and_survive_the_schema_string(
    schema: StructType, keep: bool
) -> None:
    mapped, highest = assign_mapping(schema, max_id=0, keep_names=keep)
    check_mapping(mapped, {MAX_COLUMN_ID_KEY: str(highest)})
    assert parse_schema(mapped.to_json()) == mapped
    # Assigning again changes nothing: ids and names are stable once given.
    assert assign_mapping(mapped, max_id=highest, keep_names=not keep) == (mapped, highest)
    # The physical schema has the same shape: only names and metadata differ.
    assert _shape(physical_schema(mapped, ID)) == _shape(mapped)


# --- mode changes and metadata ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        (None, ID, True),
        (None, NAME, True),
        (NONE, NAME, True),
        (NAME, NAME, True),
        (NONE, ID, False),
        (NAME, NONE, False),
        (ID, NONE, False),
        (NAME, ID, False),
        (ID, NAME, False),
    ],
)
def test_mode_changes_existing_files_cannot_follow_are_refused(
    old: ColumnMappingMode | None, new: ColumnMappingMode, allowed: bool
) -> None:
    if allowed:
        check_mode_change(old, new, table="t")
    else:
        with pytest.raises(InvalidPropertyError, match=r"cannot change delta\.columnMapping\.mode"):
            check_mode_change(old, new, table="t")


def test_turning_mapping_on_keeps_the_current_names_as_physical_names() -> None:
    before = metadata(plain("a", "b"))
    after = mapped_metadata(
        replace(before, configuration={"delta.columnMapping.mode": "name"}), before, table="t"
    )
    schema = parse_schema(after.schema_string)
    assert [f.metadata[PHYSICAL_NAME_KEY] for f in schema.fields] == ["a", "b"]
    assert after.configuration[MAX_COLUMN_ID_KEY] == "2"


def test_a_column_added_later_gets_a_fresh_physical_name_and_the_next_id() -> None:
    conf = {"delta.columnMapping.mode": "name"}
    created = mapped_metadata(metadata(plain("a"), **conf), None, table="t")
    grown = parse_schema(created.schema_string)
    grown = StructType((*grown.fields, StructField("a2", PrimitiveType("long"))))
    after = mapped_metadata(replace(created, schema_string=grown.to_json()), created, table="t")
    new = parse_schema(after.schema_string).fields[1]
    assert new.metadata[ID_KEY] == 2
    assert new.metadata[PHYSICAL_NAME_KEY] not in ("a", "a2")
    assert after.configuration[MAX_COLUMN_ID_KEY] == "2"


def test_ids_are_never_reused_even_after_a_drop_or_a_replace() -> None:
    conf = {"delta.columnMapping.mode": "id"}
    created = mapped_metadata(metadata(plain("a", "b"), **conf), None, table="t")
    shrunk = dropped(parse_schema(created.schema_string), ["b"])
    readded = StructType((*shrunk.fields, StructField("b", PrimitiveType("long"))))
    after = mapped_metadata(replace(created, schema_string=readded.to_json()), created, table="t")
    assert parse_schema(after.schema_string).fields[1].metadata[ID_KEY] == 3
    replaced = mapped_metadata(metadata(plain("z"), **conf), after, table="t", replacing=True)
    assert parse_schema(replaced.schema_string).fields[0].metadata[ID_KEY] == 4


def test_replacing_a_table_may_change_the_mode() -> None:
    created = mapped_metadata(
        metadata(plain("a"), **{"delta.columnMapping.mode": "name"}), None, table="t"
    )
    off = mapped_metadata(metadata(plain("a")), created, table="t", replacing=True)
    assert off == metadata(plain("a"))
    with pytest.raises(InvalidPropertyError):
        mapped_metadata(metadata(plain("a")), created, table="t")


# --- rename and drop ------------------------------------------------------------------------


def test_rename_keeps_the_id_and_physical_name() -> None:
    mapped, _ = assign_mapping(plain("a", "b"), max_id=0, keep_names=False)
    out = renamed(mapped, "A", "c")
    assert out.field_names() == ["c", "b"]
    assert out.fields[0].metadata == mapped.fields[0].metadata
    # Only the case changes: allowed.
    assert renamed(mapped, "a", "A").field_names() == ["A", "b"]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("zz", "c", "not in the table"), ("a", "B", "already has a column 'b'"), ("a", " ", "empty")],
)
def test_a_rename_that_would_break_the_schema_is_refused(old: str, new: str, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        renamed(plain("a", "b"), old, new)


def test_drop_removes_the_columns_and_refuses_nonsense() -> None:
    assert dropped(plain("a", "b", "c"), ["C", "a"]).field_names() == ["b"]
    for names, message in (
        (["zz"], "not in the table"),
        (["a", "A"], "named twice"),
        (["a", "b", "c"], "every column"),
        ([], "at least one"),
    ):
        with pytest.raises(SchemaMismatchError, match=message):
            dropped(plain("a", "b", "c"), names)


def test_statistics_under_physical_names_skip_files_by_the_renamed_column() -> None:
    mapped, _ = assign_mapping(plain("a"), max_id=0, keep_names=False)
    physical = mapped.fields[0].metadata[PHYSICAL_NAME_KEY]
    schema = renamed(mapped, "a", "renamed")
    stats = {"numRecords": 2, "minValues": {physical: 1}, "maxValues": {physical: 5}}
    f = AddFile("f", {}, 1, 1, True, stats=json.dumps(stats))
    above = Comparison(ComparisonOp.GT, Column("renamed"), Literal(10))
    inside = Comparison(ComparisonOp.GT, Column("renamed"), Literal(3))
    assert not file_may_match(above, f, schema=schema, partition_columns=())
    assert file_may_match(inside, f, schema=schema, partition_columns=())


def _walk(t: DataType) -> list[StructField]:
    out: list[StructField] = []
    if isinstance(t, StructType):
        for f in t.fields:
            out.append(f)
            out.extend(_walk(f.type))
    elif isinstance(t, ArrayType):
        out.extend(_walk(t.element_type))
    elif isinstance(t, MapType):
        out.extend(_walk(t.key_type) + _walk(t.value_type))
    return out


def _shape(t: DataType) -> object:
    if isinstance(t, StructType):
        return tuple(_shape(f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return ("array", _shape(t.element_type))
    if isinstance(t, MapType):
        return ("map", _shape(t.key_type), _shape(t.value_type))
    return t


def test_a_schema_leaves_its_mapping_behind_when_copied_elsewhere() -> None:
    mapped, _ = assign_mapping(NESTED, max_id=0, keep_names=False)
    tagged = StructType(
        (StructField("c", PrimitiveType("string"), True, {"comment": "kept"}), *mapped.fields)
    )
    clean = without_mapping(physical_schema(tagged, ID))
    assert all(f.metadata in ({}, {"comment": "kept"}) for f in _walk(clean))
    assert without_mapping(tagged).fields[0].metadata == {"comment": "kept"}
    assert [f.name for f in _walk(without_mapping(tagged))] == [f.name for f in _walk(tagged)]
