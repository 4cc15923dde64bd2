"""Checking all winners at once (the commit loop) raises exactly what checking each would."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltatx.kernel import conflicts
from deltatx.kernel.actions import Action, AddFile, CommitInfo
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.conflicts import ConflictChecker
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Expression, Literal, and_
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.transaction import ReadSet

from ..conflict_harness import Table, add, describe, each, metadata, outcome_of, rm, schema, txn
from ..examples import examples

TABLE = Table(schema(id="long", part="string"), ("part",))
PARTS = ("a", "b", "c")


def _stats(lo: int, hi: int) -> dict[str, Any]:
    return {
        "numRecords": 5,
        "minValues": {"id": lo},
        "maxValues": {"id": hi},
        "nullCount": {"id": 0},
    }


@st.composite
def _files(draw: st.DrawFn, prefix: str) -> list[AddFile]:
    out = []
    for i in range(draw(st.integers(0, 4))):
        lo = draw(st.integers(0, 90))
        out.append(
            add(
                f"{prefix}-{i}",
                {"part": draw(st.sampled_from(PARTS))},
                dc=draw(st.booleans()) or draw(st.booleans()),
                stats=_stats(lo, lo + draw(st.integers(0, 20))),
            )
        )
    return out


@st.composite
def _winner(draw: st.DrawFn, version: int) -> WinningCommit:
    files: list[Action] = list(draw(_files(f"w{version}")))
    kind = draw(st.sampled_from(["append", "append", "append", "remove", "txn", "metadata"]))
    if kind == "remove":
        files.append(rm(draw(st.sampled_from(["r-0", "r-1", "other"]))))
    elif kind == "txn":
        files.append(txn(draw(st.sampled_from(["app", "other"]))))
    elif kind == "metadata":
        files.append(metadata(TABLE))
    info = (
        []
        if draw(st.booleans()) and version % 3 == 0
        else [
            CommitInfo(operation="WRITE", is_blind_append=kind == "append" and draw(st.booleans()))
        ]
    )
    return WinningCommit(version=version, actions=(*info, *files))


@st.composite
def _read_predicates(draw: st.DrawFn) -> tuple[Expression, ...]:
    preds: list[Expression] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            part = draw(st.sampled_from(PARTS))
            preds.append(Comparison(ComparisonOp.EQ, Column("part"), Literal(part)))
        else:
            lo = draw(st.integers(0, 100))
            preds.append(
                and_(
                    Comparison(ComparisonOp.GE, Column("id"), Literal(lo)),
                    Comparison(ComparisonOp.LT, Column("id"), Literal(lo + 10)),
                )
            )
    return tuple(preds)


@st.composite
def _pending(draw: st.DrawFn) -> PendingCommit:
    read_files = {p: add(p, {"part": "a"}, stats=_stats(0, 9)) for p in ("r-0", "r-1")}
    removes = [f.remove(timestamp=1) for f in read_files.values() if draw(st.booleans())]
    blind = draw(st.booleans()) and not removes
    apps = (txn("app"),) if draw(st.booleans()) else ()
    return PendingCommit(
        read_version=1,
        read_set=ReadSet(
            predicates=() if blind else draw(_read_predicates()),
            read_files={} if blind else read_files,
            read_whole_table=not blind and draw(st.integers(0, 5)) == 0,
        ),
        actions=(*removes, *apps, add("mine", {"part": "a"})),
        operation=Operation(OperationName.WRITE if blind else OperationName.UPDATE, {}),
        isolation_level=draw(st.sampled_from(list(IsolationLevel))),
        is_blind_append=blind,
        schema=TABLE.schema,
        partition_columns=TABLE.partition_columns,
    )


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), _pending(), st.integers(1, 8), st.sampled_from([3, conflicts._BATCH_FILES]))
def test_check_all_raises_what_checking_each_winner_raises(
    data: st.DataObject, pending: PendingCommit, count: int, batch: int
) -> None:
    """The same conflict (kind, winner, file, message) or none, whatever the mix of winners
    and however many files are asked at once."""
    winners = [data.draw(_winner(version)) for version in range(2, 2 + count)]
    one_by_one = outcome_of(lambda: each(pending, winners))
    default, conflicts._BATCH_FILES = conflicts._BATCH_FILES, batch
    try:
        at_once = outcome_of(lambda: ConflictChecker(pending).check_all(winners))
    finally:
        conflicts._BATCH_FILES = default
    assert describe(at_once) == describe(one_by_one)


@pytest.mark.parametrize("batch", [1, 2, 3, 256])
def test_the_first_conflicting_append_is_named(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Of several appends asked at once, the conflict names the first winner and file that
    the read predicate covers, whichever batches the files fall into."""
    monkeypatch.setattr(conflicts, "_BATCH_FILES", batch)
    read = Comparison(ComparisonOp.EQ, Column("part"), Literal("b"))
    pending = PendingCommit(
        read_version=1,
        read_set=ReadSet(predicates=(read,)),
        actions=(add("mine", {"part": "b"}),),
        operation=Operation(OperationName.UPDATE, {}),
        isolation_level=IsolationLevel.SERIALIZABLE,
        is_blind_append=False,
        schema=TABLE.schema,
        partition_columns=TABLE.partition_columns,
    )
    winners = [
        WinningCommit(version=2, actions=(add("x", {"part": "a"}, stats=_stats(0, 1)),)),
        WinningCommit(version=3, actions=(add("v", {"part": "a"}), add("u", {"part": "c"}))),
        WinningCommit(version=4, actions=(add("y", {"part": "c"}), add("z", {"part": "b"}))),
        WinningCommit(version=5, actions=(add("w", {"part": "b"}),)),
    ]
    exc = outcome_of(lambda: ConflictChecker(pending).check_all(winners))
    assert exc is not None
    assert (type(exc).__name__, exc.winning_version, exc.file) == (
        "ConcurrentAppendException",
        4,
        "z",
    )
