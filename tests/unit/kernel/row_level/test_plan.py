"""The rebase plan: the commit a settlement rebased and the deletion vectors it must carry,
as row sets, nothing written (row-level concurrency, seed 000: concurrent DML on other rows of
a file land together, each vector the union of both)."""

from __future__ import annotations

import json
from dataclasses import replace

from deltatx.kernel.actions import DeletionVectorDescriptor
from deltatx.kernel.commits import PendingCommit
from deltatx.kernel.expressions import TRUE
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.plan import RebasePlan, with_deleted_rows
from deltatx.kernel.transaction import ReadTracker

from ...conflict_harness import add, schema

STATS = {"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}


def _pending(*actions: object) -> PendingCommit:
    tracker = ReadTracker()
    tracker.record_scan(TRUE, [add("a"), add("b")])
    return PendingCommit(
        read_version=1,
        read_set=tracker.freeze(),
        actions=actions,  # type: ignore[arg-type]
        operation=Operation(OperationName.DELETE),
        isolation_level=IsolationLevel.WRITE_SERIALIZABLE,
        is_blind_append=False,
        schema=schema(id="long"),
        partition_columns=(),
        deletion_vectors=True,
    )


def _dv() -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", "x" * 20, 10, 1, offset=1)


def test_a_new_plan_carries_no_vector() -> None:
    a = add("a")
    plan = RebasePlan(_pending(a.remove(timestamp=1), replace(a, deletion_vector=_dv())))
    assert dict(plan.vectors) == {}
    assert not plan.is_planned(a) and plan.has_vector(replace(a, deletion_vector=_dv()))
    assert not plan.has_vector(a)


def test_rebased_adds_vectors_and_keeps_earlier_ones() -> None:
    a, b = add("a"), add("b")
    plan = RebasePlan(_pending(a.remove(timestamp=1), a, b.remove(timestamp=1), b))
    once = plan.rebased(plan.pending.actions, vectors={"a": frozenset({1})})
    twice = once.rebased(once.pending.actions, vectors={"b": frozenset({2, 3})})
    assert dict(twice.vectors) == {"a": frozenset({1}), "b": frozenset({2, 3})}
    assert twice.is_planned(a) and twice.has_vector(a)
    assert plan.vectors == {}  # a plan is a value: rebasing makes a new one


def test_vectors_of_files_no_longer_added_are_dropped() -> None:
    """A file a winning compaction moved is replaced by the output: its planned vector goes."""
    a, o = add("a"), add("o")
    plan = RebasePlan(_pending(a.remove(timestamp=1), a), {"a": frozenset({1})})
    moved = plan.rebased((o.remove(timestamp=1), o), vectors={"o": frozenset({4})})
    assert dict(moved.vectors) == {"o": frozenset({4})}
    assert moved.pending.actions == (o.remove(timestamp=1), o)


def test_rebased_replaces_the_read_set_and_baseline_only_when_given() -> None:
    a = add("a")
    plan = RebasePlan(_pending(a.remove(timestamp=1)))
    same = plan.rebased(plan.pending.actions)
    assert same.pending == plan.pending
    tracker = ReadTracker()
    tracker.record_scan(TRUE, [a])
    other = tracker.freeze()
    changed = plan.rebased(plan.pending.actions, read_set=other, compaction_baseline={"a": None})
    assert changed.pending.read_set is other
    assert dict(changed.pending.compaction_baseline) == {"a": None}


def test_with_deleted_rows_keeps_the_file_and_loosens_its_statistics() -> None:
    f = replace(add("a"), stats=json.dumps(STATS))
    kept = with_deleted_rows(f, frozenset({0, 9}), physical_rows=10)
    assert kept is not None and kept.path == "a"
    # the deleted rows may have held the bounds: they are no longer tight
    assert json.loads(kept.stats or "{}").get("tightBounds") is False


def test_with_deleted_rows_drops_a_file_with_no_row_left() -> None:
    f = replace(add("a"), stats=json.dumps(STATS))
    assert with_deleted_rows(f, frozenset(range(10)), physical_rows=10) is None


def test_with_deleted_rows_keeps_a_file_of_unknown_size() -> None:
    f = add("a")
    assert with_deleted_rows(f, frozenset(range(10)), physical_rows=None) is not None
