"""The columnar table state: wire <-> state conversions and the replay key."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.log import _state

ROOT = "/t"


def _add(path: str, **extra: Any) -> dict[str, Any]:
    return {
        "path": path,
        "partitionValues": {"p": "1"},
        "size": 10,
        "modificationTime": 5,
        "dataChange": True,
        **extra,
    }


DV = {
    "storageType": "u",
    "pathOrInlineDv": "ab" * 11,
    "offset": 1,
    "sizeInBytes": 34,
    "cardinality": 2,
}


def test_adds_round_trip_through_the_state_table() -> None:
    table = _state.files_from_dicts([_add("a.parquet"), _add("b.parquet", deletionVector=DV)])
    assert table.schema == _state.FILES_SCHEMA
    files = _state.add_files_from_table(table)
    assert [f.path for f in files] == ["a.parquet", "b.parquet"]
    assert files[1].deletion_vector is not None and files[1].deletion_vector.cardinality == 2
    assert files[0].partition_values == {"p": "1"}


def test_checkpoint_structs_use_the_wire_names() -> None:
    table = _state.files_from_dicts([_add("a.parquet", deletionVector=DV)])
    wire = _state.files_to_checkpoint(table)
    assert wire.type.get_field_index("partitionValues") >= 0
    back = _state.files_from_wire(wire)
    assert back.column("path").to_pylist() == ["a.parquet"]
    # Checkpoints carry no maxRowIndex.
    assert wire.field("deletionVector").type.get_field_index("maxRowIndex") < 0


def test_a_missing_required_field_is_detected() -> None:
    body = _add("a.parquet")
    del body["size"]
    assert _state.missing_required(_state.files_from_dicts([body]), _state.ADD_REQUIRED)
    assert not _state.missing_required(
        _state.files_from_dicts([_add("a.parquet")]), _state.ADD_REQUIRED
    )


def test_negative_sizes_are_found() -> None:
    table = _state.files_from_dicts([_add("a"), _add("b", size=-1)])
    assert _state.negative_size(table) == 1
    assert _state.negative_size(_state.files_from_dicts([_add("a")])) is None


_PATHS = st.one_of(
    st.text(alphabet="ab /%.:", min_size=1, max_size=8),
    st.sampled_from(["a b", "a%20b", "/t/a b", "file:///t/a%20b", "./x", "../x", "file://h/x"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_PATHS, st.booleans()), min_size=1, max_size=6))
def test_vectorised_keys_agree_with_per_action_keys(rows: list[tuple[str, bool]]) -> None:
    bodies = [_add(p, **({"deletionVector": DV} if with_dv else {})) for p, with_dv in rows]
    table = _state.files_from_dicts(bodies)
    vectorised = _state.table_keys(table, root=ROOT)
    assert isinstance(vectorised, pa.ChunkedArray)
    assert vectorised.to_pylist() == [_state.dict_key(b, root=ROOT) for b in bodies]


def test_spellings_of_one_file_share_a_key() -> None:
    keys = {
        _state.dict_key(_add(p), root=ROOT) for p in ("a b", "a%20b", "/t/a b", "file:/t/a%20b")
    }
    assert keys == {"a b"}


def test_file_summaries_are_what_skipping_reads_of_each_add() -> None:
    table = _state.files_from_dicts([_add("a.parquet", stats='{"numRecords":1}'), _add("b")])
    files = _state.add_files_from_table(table)
    summaries = _state.file_summaries(table, partitioned=True)
    assert [(s.partition_values, s.stats) for s in summaries] == [
        (f.partition_values, f.stats) for f in files
    ]
    # Without partition columns no file has partition values to read.
    flat = _state.file_summaries(table, partitioned=False)
    assert [(s.partition_values, s.stats) for s in flat] == [({}, f.stats) for f in files]
