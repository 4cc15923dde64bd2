"""The commit-time protocol rules, table-driven: each rule refuses its violation, typed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import (
    AppendOnlyViolationError,
    DeltaError,
    InvalidArgumentError,
    InvalidTableError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import (
    Action,
    AddFile,
    DeletionVectorDescriptor,
    Metadata,
    ProtocolAction,
    RemoveFile,
)
from deltatx.kernel.commit_rules import (
    _all_plain,
    _plain,
    check_allowed,
    check_commit,
    check_data_path,
    check_data_paths,
)
from deltatx.kernel.deletion_vectors import z85_encode
from deltatx.kernel.file_paths import relative_to, resolve
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.table_configuration import TableConfiguration

ROOT = "/data/t"
SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)
DV_PROTOCOL = ProtocolAction(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors"))
LEGACY = ProtocolAction(1, 2)


def cfg(protocol: ProtocolAction = DV_PROTOCOL, **conf: str) -> TableConfiguration:
    return TableConfiguration.of(protocol, Metadata("t", SCHEMA, (), dict(conf)))


def dv(**kw: object) -> DeletionVectorDescriptor:
    fields: dict[str, object] = {
        "storage_type": "u",
        "path_or_inline_dv": z85_encode(bytes(16)),
        "size_in_bytes": 10,
        "cardinality": 1,
        "offset": 1,
    }
    fields.update(kw)
    return DeletionVectorDescriptor(**fields)  # type: ignore[arg-type]


def add(path: str = "a.parquet", data_change: bool = True, **kw: object) -> AddFile:
    return AddFile(
        data_change=data_change, path=path, partition_values={}, size=1, modification_time=1, **kw
    )  # type: ignore[arg-type]


def remove(path: str = "a.parquet", data_change: bool = True) -> RemoveFile:
    return RemoveFile(path=path, deletion_timestamp=1, data_change=data_change)


APPEND_ONLY = cfg(**{"delta.appendOnly": "true"})
CONSTRAINED = cfg(**{"delta.constraints.pos": "id > 0"})
UNKNOWN_WRITER = cfg(ProtocolAction(3, 7, (), ("futureWriter",)))
WRITE = Operation(OperationName.WRITE)


@dataclass(frozen=True)
class Violation:
    configuration: TableConfiguration
    actions: Sequence[Action]
    error: type[DeltaError]
    match: str


VIOLATIONS = {
    # PROTOCOL.md "Append-only Tables": no remove with dataChange=true.
    "append-only-remove": Violation(
        APPEND_ONLY, [remove()], AppendOnlyViolationError, "append-only"
    ),
    "append-only-dv-delete": Violation(
        APPEND_ONLY,
        [remove(), add(deletion_vector=dv())],
        AppendOnlyViolationError,
        "deletion vector",
    ),
    "unknown-writer-feature": Violation(
        UNKNOWN_WRITER, [add()], UnsupportedFeatureError, "futureWriter"
    ),
    "dv-without-feature": Violation(
        cfg(LEGACY), [add(deletion_vector=dv())], InvalidArgumentError, "deletionVectors"
    ),
    "dv-bad-storage-type": Violation(
        cfg(), [add(deletion_vector=dv(storage_type="q"))], InvalidArgumentError, "storageType 'q'"
    ),
    "dv-negative-cardinality": Violation(
        cfg(),
        [add(deletion_vector=dv(cardinality=-1))],
        InvalidArgumentError,
        "cardinality is negative",
    ),
    "dv-bad-z85": Violation(
        cfg(),
        [add(deletion_vector=dv(path_or_inline_dv="~" * 20))],
        InvalidArgumentError,
        "not a valid",
    ),
    "dv-file-outside-root": Violation(
        cfg(),
        [add(deletion_vector=dv(storage_type="p", path_or_inline_dv="/etc/x.bin"))],
        InvalidArgumentError,
        "outside the table root",
    ),
    "constraint-on-append": Violation(CONSTRAINED, [add()], UnsupportedFeatureError, "pos"),
    "path-dotdot": Violation(cfg(), [add("../x")], InvalidArgumentError, "escapes"),
    "path-encoded-dotdot": Violation(cfg(), [add("%2e%2e%2fx")], InvalidArgumentError, "escapes"),
    "path-inner-dotdot": Violation(cfg(), [add("sub/../../x")], InvalidArgumentError, "escapes"),
    "path-into-log": Violation(
        cfg(), [add("_delta_log/x.json")], InvalidArgumentError, "_delta_log"
    ),
    "path-other-store": Violation(cfg(), [add("s3://b/x")], InvalidArgumentError, "file: URIs"),
    # PROTOCOL.md "Column Mapping": the mode needs the feature in the protocol ...
    "column-mapping-without-feature": Violation(
        cfg(**{"delta.columnMapping.mode": "name"}), [add()], InvalidArgumentError, "columnMapping"
    ),
    # ... and every column an id and a physical name.
    "column-mapping-incomplete": Violation(
        cfg(ProtocolAction(2, 5), **{"delta.columnMapping.mode": "name"}),
        [add()],
        InvalidTableError,
        "lacks",
    ),
    "column-mapping-unknown-mode": Violation(
        cfg(ProtocolAction(2, 5), **{"delta.columnMapping.mode": "position"}),
        [add()],
        UnsupportedFeatureError,
        "position",
    ),
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_each_violation_is_refused_with_a_typed_error(name: str) -> None:
    v = VIOLATIONS[name]
    with pytest.raises(v.error, match=v.match):
        check_commit(v.configuration, v.actions, WRITE, table_root=ROOT)


@pytest.mark.parametrize(
    ("configuration", "actions"),
    [
        (APPEND_ONLY, [add()]),  # appending to an append-only table
        (APPEND_ONLY, [remove(data_change=False), add(data_change=False)]),  # compaction
        (CONSTRAINED, [remove()]),  # deleting rows cannot break a constraint
        (CONSTRAINED, [add(data_change=False)]),  # rearranging rows neither
        (CONSTRAINED, [remove(), add(deletion_vector=dv())]),  # a DV delete adds no row
        (cfg(), [add(f"file://{ROOT}/x.parquet"), add(f"{ROOT}/y.parquet")]),  # absolute, inside
        (cfg(), [add("a%20b/x.parquet", deletion_vector=dv())]),
    ],
)
def test_allowed_commits_pass(configuration: TableConfiguration, actions: list[Action]) -> None:
    check_commit(configuration, actions, WRITE, table_root=ROOT)


def test_upfront_check_refuses_what_is_knowable_before_writing() -> None:
    with pytest.raises(AppendOnlyViolationError, match="UPDATE"):
        check_allowed(APPEND_ONLY, OperationName.UPDATE, deletes_rows=True)
    with pytest.raises(UnsupportedFeatureError, match="futureWriter"):
        check_allowed(UNKNOWN_WRITER, OperationName.OPTIMIZE, deletes_rows=False)
    check_allowed(APPEND_ONLY, OperationName.WRITE, deletes_rows=False)
    check_allowed(CONSTRAINED, OperationName.DELETE, deletes_rows=True)


def test_files_checked_against_the_constraints_may_be_added() -> None:
    actions = [add("a.parquet"), add("b.parquet")]
    check_commit(
        CONSTRAINED, actions, WRITE, table_root=ROOT, constraints_checked={"a.parquet", "b.parquet"}
    )
    with pytest.raises(UnsupportedFeatureError, match=r"'b\.parquet'"):
        check_commit(
            CONSTRAINED, actions, WRITE, table_root=ROOT, constraints_checked={"a.parquet"}
        )


@pytest.mark.parametrize("path", ["../x", "%2e%2e%2fx", "sub/../../x", ".", ""])
def test_relative_paths_must_not_climb_out(path: str) -> None:
    with pytest.raises(InvalidArgumentError):
        check_data_path(path, root=ROOT)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="ab_=-./%:2eE\x00", max_size=14))
def test_plain_paths_accepted_at_once_lie_below_the_root(path: str) -> None:
    """The shortcut for plain relative paths accepts only what the full resolution accepts."""
    if not _plain(path):
        return
    location = resolve(path, root=ROOT)
    relative = relative_to(location, root=ROOT)
    assert relative is not None
    assert relative == path
    check_data_path(path, root=ROOT)


@pytest.mark.parametrize(
    "path", ["_delta_log/x.parquet", "_delta_log", "a/./b", "a/../b", ".x", "a..b/c"]
)
def test_paths_outside_the_shortcut_take_the_full_check(path: str) -> None:
    assert not _plain(path)
    if path.startswith("_delta_log"):
        with pytest.raises(InvalidArgumentError, match="_delta_log"):
            check_data_path(path, root=ROOT)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(["_delta_log", "_delta_logs", "_delta_log.x", "x", ".", ""])))
def test_the_shortcut_never_accepts_a_path_in_the_log_directory(parts: list[str]) -> None:
    """The shortcut and the full check agree on paths whose segments are near the log dir."""
    path = "/".join(parts)
    try:
        check_data_path(path, root=ROOT)
        accepted = True
    except InvalidArgumentError:
        accepted = False
    if _plain(path):
        assert accepted
    if parts and parts[0] == "_delta_log":
        assert not accepted and not _plain(path)


# The plain-path shortcut as first written: segments of name characters with inner dots only.
_SEGMENT = r"[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_=-]+)*"
_FIRST_FORM = re.compile(rf"(?!_delta_log(?:/|$)){_SEGMENT}(?:/{_SEGMENT})*")


@settings(max_examples=3000, deadline=None)
@given(
    st.text(alphabet="ab_=-./%:é\n", max_size=12)
    | st.sampled_from(["_delta_log", "_delta_logx/a", "_delta_log/a", "a/_delta_log/b"])
)
def test_the_plain_path_shortcut_accepts_the_paths_its_first_form_did(path: str) -> None:
    assert _plain(path) == bool(_FIRST_FORM.fullmatch(path))


def _path_lists(alphabet: str, near: list[str], *, min_size: int) -> st.SearchStrategy[list[str]]:
    """Lists of short paths from ``alphabet``, mixed with paths ``near`` the edge of a rule."""
    return st.lists(
        st.text(alphabet=alphabet, max_size=8) | st.sampled_from(near),
        min_size=min_size,
        max_size=6,
    )


_PATHS_NEAR_THE_LOG = _path_lists(
    "ab_=-./%é", ["_delta_log", "_delta_log/a", "_delta_logx", "a/_delta_log", "x.y"], min_size=1
)
_PATHS_WITH_NEWLINES = _path_lists(
    "ab_=-./%\n",
    ["_delta_log", "_delta_log/a", "a\n_delta_log", "a\nb", "ok/x.parquet"],
    min_size=0,
)


@settings(max_examples=3000, deadline=None)
@given(_PATHS_NEAR_THE_LOG)
def test_joined_paths_are_plain_when_each_is_in_its_first_form(paths: list[str]) -> None:
    """The test of a whole commit's paths at once accepts exactly when every path is plain."""
    expected = all(_FIRST_FORM.fullmatch(p) for p in paths)
    assert _all_plain(paths) == expected


def _first_refusal(paths: list[str], check: Callable[[], None]) -> str | None:
    try:
        check()
    except InvalidArgumentError as exc:
        return str(exc)
    return None


@settings(max_examples=1500, deadline=None)
@given(_PATHS_WITH_NEWLINES)
def test_a_commits_paths_checked_at_once_are_refused_as_one_by_one(paths: list[str]) -> None:
    """One match over the joined paths refuses what the per-path check refuses, naming the same
    path first, also when a path holds the newline that joins them."""

    def one_by_one() -> None:
        for path in paths:
            check_data_path(path, root=ROOT)

    assert _first_refusal(paths, lambda: check_data_paths(paths, root=ROOT)) == _first_refusal(
        paths, one_by_one
    )
