"""The JSON-lines codec: round trips of every action and byte-exact PROTOCOL.md examples."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Format,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
    UnknownAction,
)
from deltatx.kernel.codec import (
    action_to_json_obj,
    parse_action,
    parse_commit,
    serialize_action,
    serialize_commit,
)

KNOWN_KEYS = {"protocol", "metaData", "add", "remove", "cdc", "txn", "domainMetadata", "commitInfo"}

text = st.text(max_size=12)
ints = st.integers(min_value=-(2**62), max_value=2**62)
opt_int = st.none() | ints
opt_text = st.none() | text
str_map = st.dictionaries(text, text, max_size=3)
nullable_str_map = st.dictionaries(text, st.none() | text, max_size=3)
json_scalar = st.none() | st.booleans() | ints | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)


def extra_for(*known: str) -> st.SearchStrategy[dict[str, Any]]:
    """Unknown fields: any names that do not collide with the action's wire names."""
    names = st.text(min_size=1, max_size=8).filter(lambda k: k not in known)
    return st.dictionaries(names, json_value, max_size=3)


dvs = st.builds(
    DeletionVectorDescriptor,
    storage_type=st.sampled_from(["u", "i", "p"]),
    path_or_inline_dv=text,
    size_in_bytes=ints,
    cardinality=ints,
    offset=opt_int,
    max_row_index=opt_int,
    extra=extra_for(
        "storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality", "maxRowIndex"
    ),
)
ADD_KEYS = [
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
]
REMOVE_KEYS = [
    "path",
    "deletionTimestamp",
    "dataChange",
    "extendedFileMetadata",
    "partitionValues",
    "size",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
]
COMMIT_INFO_KEYS = [
    "timestamp",
    "operation",
    "operationParameters",
    "readVersion",
    "isolationLevel",
    "isBlindAppend",
    "operationMetrics",
    "userMetadata",
    "engineInfo",
    "txnId",
]

actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(
        ProtocolAction,
        min_reader_version=ints,
        min_writer_version=ints,
        reader_features=st.none() | st.lists(text, max_size=3).map(tuple),
        writer_features=st.none() | st.lists(text, max_size=3).map(tuple),
        extra=extra_for("minReaderVersion", "minWriterVersion", "readerFeatures", "writerFeatures"),
    ),
    st.builds(
        Metadata,
        id=text,
        schema_string=text,
        partition_columns=st.lists(text, max_size=3).map(tuple),
        configuration=str_map,
        format=st.builds(Format, provider=text.filter(bool), options=str_map),
        name=opt_text,
        description=opt_text,
        created_time=opt_int,
        extra=extra_for(
            "id",
            "name",
            "description",
            "format",
            "schemaString",
            "partitionColumns",
            "configuration",
            "createdTime",
        ),
    ),
    st.builds(
        AddFile,
        path=text,
        partition_values=nullable_str_map,
        size=ints,
        modification_time=ints,
        data_change=st.booleans(),
        stats=opt_text,
        tags=st.none() | nullable_str_map,
        deletion_vector=st.none() | dvs,
        base_row_id=opt_int,
        default_row_commit_version=opt_int,
        clustering_provider=opt_text,
        extra=extra_for(*ADD_KEYS),
    ),
    st.builds(
        RemoveFile,
        path=text,
        deletion_timestamp=opt_int,
        data_change=st.booleans(),
        extended_file_metadata=st.none() | st.booleans(),
        partition_values=st.none() | nullable_str_map,
        size=opt_int,
        stats=opt_text,
        tags=st.none() | nullable_str_map,
        deletion_vector=st.none() | dvs,
        base_row_id=opt_int,
        default_row_commit_version=opt_int,
        extra=extra_for(*REMOVE_KEYS),
    ),
    st.builds(
        AddCDCFile,
        path=text,
        partition_values=nullable_str_map,
        size=ints,
        data_change=st.booleans(),
        tags=st.none() | nullable_str_map,
        extra=extra_for("path", "partitionValues", "size", "dataChange", "tags"),
    ),
    st.builds(
        SetTransaction,
        app_id=text,
        version=ints,
        last_updated=opt_int,
        extra=extra_for("appId", "version", "lastUpdated"),
    ),
    st.builds(
        DomainMetadata,
        domain=text,
        configuration=text,
        removed=st.booleans(),
        extra=extra_for("domain", "configuration", "removed"),
    ),
    st.builds(
        CommitInfo,
        timestamp=opt_int,
        operation=opt_text,
        operation_parameters=st.none()
        | st.dictionaries(text, text, max_size=3)
        | st.dictionaries(
            text, json_value | st.floats(allow_nan=False, allow_infinity=False), max_size=3
        ),
        read_version=opt_int,
        isolation_level=opt_text,
        is_blind_append=st.none() | st.booleans(),
        operation_metrics=st.none() | str_map,
        user_metadata=opt_text,
        engine_info=opt_text,
        txn_id=opt_text,
        extra=extra_for(*COMMIT_INFO_KEYS),
    ),
    st.builds(
        UnknownAction,
        key=st.text(min_size=1, max_size=10).filter(lambda k: k not in KNOWN_KEYS),
        value=json_value,
    ),
)


def _extras(action: Action) -> list[dict[str, Any]]:
    """Every ``extra`` dict in an action (they are excluded from dataclass equality)."""
    out = [getattr(action, "extra", None)]
    dv = getattr(action, "deletion_vector", None)
    if dv is not None:
        out.append(dv.extra)
    return [e for e in out if e is not None]


@settings(max_examples=400)
@given(actions)
def test_every_action_round_trips_with_unknown_fields(action: Action) -> None:
    line = serialize_action(action)
    parsed = parse_action(line)
    assert parsed == action
    assert type(parsed) is type(action)
    assert _extras(parsed) == _extras(action)
    # Serialising the parsed action gives the identical line: unknown fields survive in order.
    assert serialize_action(parsed) == line


@settings(max_examples=100)
@given(st.lists(actions, max_size=6))
def test_commit_round_trips(batch: list[Action]) -> None:
    data = serialize_commit(batch)
    assert data.count(b"\n") == len(batch)
    assert parse_commit(data, where="c.json") == batch


def test_unknown_action_is_kept_verbatim() -> None:
    line = '{"checkpointMetadata":{"version":364475,"tags":{}}}'
    parsed = parse_action(line)
    assert parsed == UnknownAction("checkpointMetadata", {"version": 364475, "tags": {}})
    assert serialize_action(parsed) == line


# Real lines from conflict-spec.md section 7.2 (PROTOCOL.md and golden tables).
SPEC_LINES = [
    '{"commitInfo":{"timestamp":1697587762295,"operation":"UPDATE","operationParameters":{"predicate":"[\\"(id < 50)\\"]"},"readVersion":0,"isolationLevel":"Serializable","isBlindAppend":false,"operationMetrics":{"numAddedFiles":"1"},"engineInfo":"Apache-Spark/3.5.0 Delta-Lake/3.0.0","txnId":"2a6cf901-2357-430d-a046-aaf95aa527de"}}',  # noqa: E501
    '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}',
    '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors","domainMetadata","rowTracking"]}}',
    '{"metaData":{"id":"af23c9d7-fff1-4a5a-a2c8-55c59bd782aa","format":{"provider":"parquet","options":{}},"schemaString":"{\\"type\\":\\"struct\\",\\"fields\\":[{\\"name\\":\\"x\\",\\"type\\":\\"integer\\",\\"nullable\\":true,\\"metadata\\":{}}]}","partitionColumns":["x"],"configuration":{"delta.isolationLevel":"Serializable"},"createdTime":1697587743472}}',
    '{"add":{"path":"x=1/part-00000-f988.c000.snappy.parquet","partitionValues":{"x":"1"},"size":1091,"modificationTime":1697587747000,"dataChange":true,"stats":"{\\"numRecords\\":50,\\"minValues\\":{\\"id\\":0},\\"maxValues\\":{\\"id\\":49},\\"nullCount\\":{\\"id\\":0}}"}}',
    '{"add":{"path":"part=2/part-00000-ad58cb56-….c000.snappy.parquet","partitionValues":{"part":"2"},"size":736,"modificationTime":1688691720000,"dataChange":true,"stats":"{\\"numRecords\\":3,…,\\"tightBounds\\":false}","deletionVector":{"storageType":"u","pathOrInlineDv":"]m5]-UtmB0Rl<C?0(qO5","offset":1,"sizeInBytes":34,"cardinality":1}}}',
    '{"remove":{"path":"part=2/part-00000-ad58cb56-….c000.snappy.parquet","deletionTimestamp":1688691750163,"dataChange":true,"extendedFileMetadata":true,"partitionValues":{"part":"2"},"size":736}}',
    '{"remove":{"path":"part-00000-f988.snappy.parquet","deletionTimestamp":1697587762273,"dataChange":true,"extendedFileMetadata":true,"partitionValues":{},"size":1091}}',
    '{"cdc":{"path":"_change_data/cdc-00001-c.snappy.parquet","partitionValues":{},"size":1213,"dataChange":false}}',
    '{"txn":{"appId":"3ba13872-2d47-4e17-86a0-21afd2a22395","version":364475,"lastUpdated":1697587762273}}',
    '{"domainMetadata":{"domain":"delta.rowTracking","configuration":"{\\"rowIdHighWaterMark\\":17}","removed":false}}',
    '{"sidecar":{"path":"016ae953-37a9-438e-8683-9a9a4a79a395.parquet","sizeInBytes":2304522,"modificationTime":1512909768000,"tags":{}}}',
]
SPEC_TYPES = [
    CommitInfo,
    ProtocolAction,
    ProtocolAction,
    Metadata,
    AddFile,
    AddFile,
    RemoveFile,
    RemoveFile,
    AddCDCFile,
    SetTransaction,
    DomainMetadata,
    UnknownAction,
]


@pytest.mark.parametrize(("line", "kind"), list(zip(SPEC_LINES, SPEC_TYPES, strict=True)))
def test_spec_example_is_byte_exact(line: str, kind: type) -> None:
    parsed = parse_action(line)
    assert type(parsed) is kind
    assert serialize_action(parsed) == line
    if not isinstance(parsed, UnknownAction):
        assert parsed.extra == {}


def test_spec_examples_decode_to_the_documented_values() -> None:
    add = parse_action(SPEC_LINES[5])
    assert isinstance(add, AddFile) and add.deletion_vector is not None
    assert add.deletion_vector.unique_id == "u]m5]-UtmB0Rl<C?0(qO5@1"
    assert add.dv_id == "u]m5]-UtmB0Rl<C?0(qO5@1"
    info = parse_action(SPEC_LINES[0])
    assert isinstance(info, CommitInfo)
    assert info.is_blind_append is False and info.read_version == 0
    assert info.operation_parameters == {"predicate": '["(id < 50)"]'}


def test_unknown_field_is_written_after_known_ones() -> None:
    line = '{"txn":{"appId":"a","version":3,"future":{"x":[1,2]},"lastUpdated":7}}'
    parsed = parse_action(line)
    assert isinstance(parsed, SetTransaction) and parsed.extra == {"future": {"x": [1, 2]}}
    assert (
        serialize_action(parsed)
        == '{"txn":{"appId":"a","version":3,"lastUpdated":7,"future":{"x":[1,2]}}}'
    )
    assert action_to_json_obj(parsed) == json.loads(line)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (
            '{"add":{"path":"a","partitionValues":{},"size":"1","modificationTime":1,"dataChange":true}}',
            "'size'",
        ),
        (
            '{"add":{"partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "'path'",
        ),
        ('{"add":{"path":"a"}, "remove":{"path":"a"}}', "exactly one key"),
        ('{"add":', "not valid JSON"),
        ('{"protocol":{"minReaderVersion":true,"minWriterVersion":2}}', "boolean"),
    ],
)
def test_invalid_actions_are_refused_with_the_field(line: str, fragment: str) -> None:
    with pytest.raises(InvalidTableError, match=fragment):
        parse_action(line, where="00000000000000000003.json line 2")


@given(st.lists(actions, max_size=6))
def test_fast_encoding_writes_the_standard_bytes(batch: list[Action]) -> None:
    """Adds and removes are written with a faster encoder; the bytes must not change."""
    for action in batch:
        standard = json.dumps(action_to_json_obj(action), separators=(",", ":"), ensure_ascii=False)
        assert serialize_action(action) == standard


@pytest.mark.parametrize("value", [1e16, 1e-7, 0.1, [2.5e20]])
def test_commit_info_with_floats_is_written_by_the_standard_encoder(value: Any) -> None:
    """orjson spells some floats unlike the standard encoder (``1e-7`` for ``1e-07``)."""
    info = CommitInfo(timestamp=1, operation="WRITE", operation_parameters={"p": value})
    standard = json.dumps(action_to_json_obj(info), separators=(",", ":"), ensure_ascii=False)
    assert serialize_action(info) == standard
    assert serialize_commit([info]) == (standard + "\n").encode("utf-8")


plain_adds = st.builds(
    AddFile,
    path=text,
    partition_values=nullable_str_map,
    size=ints | st.integers(min_value=2**63, max_value=2**70),
    modification_time=ints,
    data_change=st.booleans(),
    stats=text,
)


@given(st.lists(plain_adds | actions, max_size=8))
def test_commit_bytes_are_the_standard_encoding(batch: list[Action]) -> None:
    """A commit's plain adds are written inline, the rest per action; the bytes must not change.

    Sizes beyond 64 bits are refused by the fast encoder and written by the standard one.
    """
    standard = "".join(
        json.dumps(action_to_json_obj(a), separators=(",", ":"), ensure_ascii=False) + "\n"
        for a in batch
    )
    assert serialize_commit(batch) == standard.encode("utf-8")


def _plain(path: str, values: dict[Any, str]) -> AddFile:
    return AddFile(
        path=path,
        partition_values=values,
        size=1,
        modification_time=2,
        data_change=True,
        stats="{}",
    )


def test_an_add_the_fast_encoder_refuses_leaves_its_neighbours_standard() -> None:
    """A run of plain adds is written by one encoder call; one add it refuses (a partition
    value keyed by None) must send the run to the per-action path, bytes unchanged."""
    batch = [_plain("a", {"p": "1"}), _plain("b", {None: "x"}), _plain("a", {"p": "1"})]
    standard = "".join(
        json.dumps(action_to_json_obj(a), separators=(",", ":"), ensure_ascii=False) + "\n"
        for a in batch
    )
    assert serialize_commit(batch) == standard.encode("utf-8")


def test_adds_with_optional_fields_or_unusual_values_are_written_as_standard() -> None:
    """Tags, row tracking and clustering are written by the run encoder, in the codec's order;
    partition values that are not a dict send the run to the per-action path."""
    tagged = replace(
        _plain("t", {"p": "1"}),
        stats=None,
        tags={"k": None},
        base_row_id=7,
        default_row_commit_version=3,
        clustering_provider="liquid",
    )
    proxied = replace(_plain("m", {}), partition_values=MappingProxyType({"p": "2"}))
    for batch in ([tagged, _plain("a", {"p": "1"})], [_plain("a", {"p": "1"}), proxied]):
        standard = "".join(
            json.dumps(action_to_json_obj(a), separators=(",", ":"), ensure_ascii=False) + "\n"
            for a in batch
        )
        assert serialize_commit(batch) == standard.encode("utf-8")
    assert b'"tags":{"k":null},"baseRowId":7,"defaultRowCommitVersion":3' in serialize_commit(
        [tagged]
    )


def test_a_path_no_encoding_can_write_is_refused_as_before() -> None:
    """A lone surrogate cannot be written as UTF-8 by any encoder: the commit is refused."""
    with pytest.raises(UnicodeEncodeError):
        serialize_commit([_plain("a", {}), _plain("b\ud800", {})])
