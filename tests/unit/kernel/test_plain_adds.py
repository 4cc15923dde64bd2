"""Plain adds take a fast path; what it builds or refuses is what the checked path would."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import fields as record_fields

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.plain_adds import _AddRecord, plain_add, plain_add_line

_ADD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.dictionaries(st.text(max_size=2), st.one_of(st.none(), st.text(max_size=2), st.integers())),
)


@settings(max_examples=300)
@given(
    st.fixed_dictionaries(
        {
            "path": st.one_of(st.text(max_size=4), _ADD_VALUES),
            # Well typed more often than not, so that most examples are plain adds.
            "partitionValues": st.one_of(
                st.dictionaries(st.text(max_size=2), st.one_of(st.none(), st.text(max_size=2))),
                _ADD_VALUES,
            ),
            "size": st.one_of(st.integers(), _ADD_VALUES),
            "modificationTime": st.one_of(st.integers(), _ADD_VALUES),
            "dataChange": st.one_of(st.booleans(), _ADD_VALUES),
        },
        optional={
            "stats": st.one_of(st.text(max_size=3), _ADD_VALUES),
            "tags": _ADD_VALUES,
            "other": _ADD_VALUES,
        },
    )
)
def test_plain_adds_read_as_the_checked_path_reads_them(obj: dict[str, Any]) -> None:
    # Plain adds skip the field-by-field checks; the result (or the refusal) is the same.
    from deltatx.kernel import codec

    try:
        expected: Any = codec._add_from(codec._Fields(obj, "t (add)"))
    except InvalidTableError as exc:
        expected = str(exc)
    try:
        got: Any = codec.action_from_json_obj({"add": obj}, where="t")
    except InvalidTableError as exc:
        got = str(exc)
    assert got == expected
    if isinstance(got, AddFile):
        assert isinstance(expected, AddFile) and got.extra == expected.extra
        assert got.partition_values is not obj["partitionValues"]  # a copy, as the checked path


@pytest.mark.parametrize(
    "line",
    [
        '{"add":{"path":"a","partitionValues":{"p":null},"size":1,"modificationTime":2,'
        '"dataChange":true,"stats":"{\\"numRecords\\":1}"}}',
        # Beyond 64 bits: orjson would read a float; the checked path names the range.
        '{"add":{"path":"a","partitionValues":{},"size":123456789012345678901234567890,'
        '"modificationTime":2,"dataChange":true}}',
        '{"add":{"path":"a","partitionValues":{},"size":NaN,"modificationTime":2,'
        '"dataChange":true}}',
        '{"add":{"path":"\\ud800","partitionValues":{},"size":1,"modificationTime":2,'
        '"dataChange":false}}',
        '{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":2,'
        '"dataChange":true},"other":1}',
        '{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":2,'
        '"dataChange":true,"tags":{"k":"v"}}}',
        '{"add":{"path":"a","path":"b","partitionValues":{},"size":1,"modificationTime":2,'
        '"dataChange":true}}',
    ],
)
def test_add_lines_read_as_the_standard_parser_reads_them(line: str) -> None:
    from deltatx.kernel import codec

    def checked() -> Any:
        try:
            return codec.action_from_json_obj(json.loads(line), where="w")
        except (InvalidTableError, ValueError) as exc:
            return type(exc).__name__ + str(exc)

    try:
        got: Any = codec.parse_action(line, where="w")
    except InvalidTableError as exc:
        got = type(exc).__name__ + str(exc)
    expected = checked()
    assert got == expected
    if isinstance(got, AddFile):
        assert got.extra == expected.extra


def test_only_plain_well_typed_adds_take_the_fast_path() -> None:
    plain = {"path": "a", "partitionValues": {"p": None}, "size": 1, "modificationTime": 2}
    built = plain_add({**plain, "dataChange": True, "stats": "{}"})
    assert built == AddFile(
        path="a",
        partition_values={"p": None},
        size=1,
        modification_time=2,
        data_change=True,
        stats="{}",
    )
    assert plain_add({**plain, "dataChange": 1}) is None  # an int is not a boolean
    assert plain_add({**plain, "dataChange": True, "tags": {}}) is None  # not plain
    assert plain_add({**plain, "dataChange": True, "size": 2**63}) is None  # past a long
    assert plain_add_line('{"remove":{"path":"a"}}') is None
    assert plain_add_line('{"add":{"path":"a"}') is None  # not JSON


def test_the_written_record_holds_every_field_of_an_add_but_its_vector_and_extras() -> None:
    """An AddFile field missing from the run encoder's record would be dropped from commits
    without an error, so the record must follow AddFile, in order."""
    written = [f.name for f in dataclasses.fields(AddFile)]
    written.remove("deletion_vector")
    written.remove("extra")
    assert [f.name for f in record_fields(_AddRecord)] == written
