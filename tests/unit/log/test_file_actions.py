"""Bulk decoding of add/remove lines: same state as the dict path, codec for anything odd."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError
from deltatx.log import DeltaLog, _state, file_actions
from deltatx.log.file_actions import FileActionBatch
from deltatx.storage import MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, write_commit

_TEXT = st.text(min_size=1, max_size=12)
_LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_DV = st.fixed_dictionaries(
    {
        "storageType": st.sampled_from(["u", "i", "p"]),
        "pathOrInlineDv": _TEXT,
        "sizeInBytes": st.integers(0, 2**31 - 1),
        "cardinality": _LONG,
    },
    optional={"offset": st.integers(0, 2**31 - 1), "maxRowIndex": _LONG},
)
_ADD = st.fixed_dictionaries(
    {
        "path": _TEXT,
        "partitionValues": st.dictionaries(_TEXT, st.none() | _TEXT, max_size=3),
        "size": _LONG,
        "modificationTime": _LONG,
        "dataChange": st.booleans(),
    },
    optional={
        "stats": _TEXT,
        "tags": st.dictionaries(_TEXT, st.none() | _TEXT, max_size=2),
        "deletionVector": _DV,
        "baseRowId": _LONG,
        "defaultRowCommitVersion": _LONG,
        "clusteringProvider": _TEXT,
        "someFutureField": st.integers(),
    },
)
_REMOVE = st.fixed_dictionaries(
    {"path": _TEXT, "dataChange": st.booleans()},
    optional={
        "deletionTimestamp": _LONG,
        "extendedFileMetadata": st.booleans(),
        "partitionValues": st.dictionaries(_TEXT, st.none() | _TEXT, max_size=3),
        "size": _LONG,
        "deletionVector": _DV,
        "baseRowId": _LONG,
        "defaultRowCommitVersion": _LONG,
    },
)


def _line(kind: str, body: dict[str, Any]) -> bytes:
    return json.dumps({kind: body}, separators=(",", ":")).encode()


@settings(max_examples=60, deadline=None)
@given(st.lists(_ADD, max_size=5), st.lists(_REMOVE, max_size=5))
def test_decoded_lines_build_the_same_state_as_decoded_dicts(
    adds: list[dict[str, Any]], removes: list[dict[str, Any]]
) -> None:
    batch = FileActionBatch()
    for i, body in enumerate(adds):
        assert batch.take_line(_line("add", body), "c.json", i)
    for i, body in enumerate(removes):
        assert batch.take_line(_line("remove", body), "c.json", i)
    assert len(batch) == len(adds) + len(removes)
    assert file_actions.files_table(batch.adds).equals(_state.files_from_dicts(adds))
    assert file_actions.tombstones_table(batch.removes).equals(
        _state.tombstones_from_dicts(removes)
    )


def test_lines_in_other_spellings_are_taken_from_decoded_objects() -> None:
    body = {
        "path": "a",
        "partitionValues": {},
        "size": 1,
        "modificationTime": 2,
        "dataChange": True,
    }
    batch = FileActionBatch()
    spaced = json.dumps({"add": body}, separators=(", ", " : ")).encode()
    assert not batch.take_line(spaced, "c.json", 1)
    assert batch.take_object("add", body, "c.json", 1)
    assert file_actions.files_table(batch.adds).equals(_state.files_from_dicts([body]))


@pytest.mark.parametrize(
    "line",
    [
        b'{"add":{"path":"a","partitionValues":{},"size":true,"modificationTime":1,"dataChange":true}}',
        b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1}}',
        b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true},'
        b'"remove":{"path":"a","dataChange":true}}',
        b'{"add":{"path":"a","partitionValues":{},"size":99999999999999999999,'
        b'"modificationTime":1,"dataChange":true}}',
        b'{"add":{"path":"a\xff","partitionValues":{},"size":1,"modificationTime":1,'
        b'"dataChange":true}}',
        b'{"remove":{"path":"a","dataChange":true,"deletionVector":{"storageType":"u"}}}',
        b'{"remove":{"path":7,"dataChange":true}}',
        b'{"remove":{"path":"a","dataChange":true,"deletionVector":{"storageType":"u",'
        b'"pathOrInlineDv":"x","offset":1099511627776,"sizeInBytes":1,"cardinality":1}}}',
        b'{"add":{"path":"a"}} trailing',
    ],
)
def test_lines_the_records_cannot_hold_are_left_to_the_codec(line: bytes) -> None:
    batch = FileActionBatch()
    assert not batch.take_line(line, "c.json", 1)
    assert len(batch) == 0


def test_deletion_vectors_are_reported_with_their_line() -> None:
    batch = FileActionBatch()
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f",
        "sizeInBytes": 9,
        "cardinality": 1,
    }
    body = {"path": "a", "dataChange": True, "deletionVector": dv}
    assert batch.take_line(_line("remove", body), "c.json", 4)
    assert file_actions.deletion_vectors(batch.removes, batch.remove_positions) == [
        ("c.json", 4, dv)
    ]


def test_flushed_chunks_keep_the_order_and_the_deletion_vectors() -> None:
    bodies = [
        {"path": p, "partitionValues": {}, "size": 1, "modificationTime": 2, "dataChange": True}
        for p in ("a", "b", "c")
    ]
    dv = {"storageType": "u", "pathOrInlineDv": "ab" * 11, "sizeInBytes": 9, "cardinality": 1}
    bodies[1]["deletionVector"] = dv
    batch = FileActionBatch()
    assert batch.take_line(_line("add", bodies[0]), "0.json", 1)
    batch.flush()
    assert batch.adds == [] and len(batch.add_chunks) == 1
    assert batch.take_line(_line("add", bodies[1]), "1.json", 2)
    assert batch.take_line(_line("remove", {"path": "z", "dataChange": True}), "1.json", 3)
    batch.flush()
    assert batch.take_line(_line("add", bodies[2]), "2.json", 1)
    assert batch.files().equals(_state.files_from_dicts(bodies))
    assert batch.tombstones().column("path").to_pylist() == ["z"]
    assert batch.deletion_vector_wires == [("1.json", 2, "add", dv)]
    assert [p[1:] for p in batch.add_positions] == [("0.json", 1), ("1.json", 2), ("2.json", 1)]


def test_a_value_the_state_cannot_hold_is_a_typed_error_naming_the_line() -> None:
    store = MemoryLogStore()
    write_commit(store, "/mem/t", 0, [PROTOCOL, METADATA])
    big = (
        b'{"remove":{"path":"a","dataChange":true,"deletionVector":{"storageType":"u",'
        b'"pathOrInlineDv":"x","offset":1099511627776,"sizeInBytes":1,"cardinality":1}}}\n'
    )
    store.write(f"/mem/t/_delta_log/{1:020d}.json", big)
    with pytest.raises(InvalidTableError, match=r"00000000000000000001\.json line 1"):
        DeltaLog.for_table("/mem/t", store=store).snapshot()
