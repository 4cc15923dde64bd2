"""schemaString: parsing, round trips, case-insensitive lookup, bad input."""

from __future__ import annotations

import json

import pytest

from deltatx.errors import InvalidTableError
from deltatx.kernel.schema import (
    ArrayType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    is_complex,
    parse_schema,
)

NESTED = StructType(
    (
        StructField("id", PrimitiveType("long"), nullable=False),
        StructField("amount", PrimitiveType("decimal(10,2)")),
        StructField("tags", ArrayType(PrimitiveType("string"), contains_null=False)),
        StructField("attrs", MapType(PrimitiveType("string"), PrimitiveType("date"))),
        StructField("s", StructType((StructField("x", PrimitiveType("timestamp_ntz")),))),
        StructField("nothing", PrimitiveType("void")),
    )
)


def test_a_schema_round_trips_through_its_string() -> None:
    assert parse_schema(NESTED.to_json()) == NESTED


def test_decimal_spacing_is_normalised_and_void_is_readable() -> None:
    text = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "d", "type": "decimal( 5 , 1 )", "nullable": True, "metadata": {}},
                {"name": "n", "type": "void", "nullable": True, "metadata": {}},
            ],
        }
    )
    parsed = parse_schema(text)
    assert [f.type for f in parsed.fields] == [PrimitiveType("decimal(5,1)"), PrimitiveType("void")]


def test_fields_are_looked_up_case_insensitively() -> None:
    field = NESTED.get("ID")
    assert field is not None and field.name == "id"
    assert NESTED.get("missing") is None
    assert NESTED.field_names()[:2] == ["id", "amount"]


def test_complex_types() -> None:
    assert [is_complex(f.type) for f in NESTED.fields] == [False, False, True, True, True, False]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ('"long"', "must describe a struct"),
        ('{"type":"struct","fields":[{"name":"a","type":"uuid","nullable":true}]}', "uuid"),
        ("[" * 10_000 + "]" * 10_000, "nested too deeply|must be"),
    ],
)
def test_bad_schema_strings_are_typed_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidTableError, match=message):
        parse_schema(text)
