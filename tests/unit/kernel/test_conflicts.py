"""conflict-spec section 6 as a table: every scenario, at Serializable, WriteSerializable and SI.

Each row (in catalogue_*.py) names its spec id; ``checks`` quotes the seed sentence (or spec
rule) it checks, and ``adjusted`` says why deltatx's outcome differs from delta-spark's where
one of "deltatx's decisions" (top of conflict-spec.md) applies. The S and WS columns run through
the real isolation-level resolution (so auto-SI downgrades happen as in seed 004); the third
column forces SnapshotIsolation like the spec's SI column.
"""

from __future__ import annotations

import pytest

from ..catalogue_derived import DELTA_RS, EXTRA
from ..catalogue_legacy import LEGACY
from ..catalogue_suite import NEW_TXN, SUITE
from ..conflict_harness import SI, WS, Case, S, run

ALL = LEGACY + SUITE + NEW_TXN + DELTA_RS + EXTRA


def _expect(case: Case, level_index: int, outcome: type[Exception] | None, *, forced: bool) -> None:
    level = (S, WS, SI)[level_index]
    if outcome is None:
        run(case, level, forced=forced)
        return
    with pytest.raises(outcome) as info:
        run(case, level, forced=forced)
    assert type(info.value) is outcome
    if level_index == 0:
        for name, value in case.attrs.items():
            assert getattr(info.value, name) == value, name


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_serializable(case: Case) -> None:
    """Outcome with the table at Serializable (conflict-spec S column, adjusted)."""
    _expect(case, 0, case.expect[0], forced=False)


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_write_serializable(case: Case) -> None:
    """Outcome with the table at WriteSerializable, the default (seed 000, seed 004)."""
    _expect(case, 1, case.expect[1], forced=False)


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_snapshot_isolation(case: Case) -> None:
    """Outcome with the commit at SnapshotIsolation (only C7 is skipped, conflict-spec 2.4)."""
    _expect(case, 2, case.expect[2], forced=True)


def test_ids_are_unique() -> None:
    ids = [c.id for c in ALL]
    assert len(ids) == len(set(ids))
    for c in ALL:
        assert c.checks


def test_catalogue_covers_the_spec() -> None:
    ids = {c.id.split("[")[0].split("-")[0] for c in ALL}
    expected = (
        {f"LT{i:02}" for i in range(1, 35)}
        | {f"OT{i:02}" for i in range(1, 19)}
        | {"OT20"}
        | {f"NT{i:02}" for i in range(1, 7)}
        | {f"DR{i:02}" for i in range(1, 23)}
        | {f"X{i:02}" for i in range(1, 5)}
    )
    assert expected <= ids
