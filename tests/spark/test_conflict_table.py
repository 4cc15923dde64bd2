"""Seed 000's conflict table WITHOUT row-level concurrency, every cell, both isolation levels.

Each pair runs for real on Spark in both commit orders (see deltatx.demo.conflicts): A begins
and stages its work, B begins on the same snapshot, stages and commits, then A commits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deltatx.demo.conflicts import (
    DOCUMENTED_SENTENCE,
    GROUPS,
    LEVELS,
    Op,
    build_template,
    documented_without_row_level,
    run_pair,
)
from deltatx.demo.examples import merge_by_partition, txn1_txn2, update_delete_by_date
from deltatx.kernel.isolation import IsolationLevel

OPS = tuple(Op)
PAIRS = [(a, b) for i, a in enumerate(OPS) for b in OPS[i:]]


@pytest.fixture(scope="module")
def templates(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[IsolationLevel, Path]:
    root = tmp_path_factory.mktemp("conflict-templates")
    out = {}
    for level in LEVELS:
        build_template(spark, root / level.value, level)
        out[level] = root / level.value
    return out


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("level", LEVELS, ids=[lvl.value for lvl in LEVELS])
@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.value}-{b.value}" for a, b in PAIRS])
def test_cell(
    spark: SparkSession,
    templates: dict[IsolationLevel, Path],
    tmp_path: Path,
    level: IsolationLevel,
    a: Op,
    b: Op,
) -> None:
    import shutil

    documented = documented_without_row_level(a.group, b.group, level)
    sentence = DOCUMENTED_SENTENCE[frozenset((a.group, b.group))]
    orders = [(a, b)] if a is b else [(a, b), (b, a)]
    errors = []
    for first, second in orders:
        table = tmp_path / f"{first.value}-{second.value}"
        shutil.copytree(templates[level], table)
        outcome = run_pair(spark, table, first=first, second=second, level=level)
        if second is Op.INSERT:
            assert outcome.error is None, "a blind INSERT never fails: " + sentence
        errors.append(outcome.error)
    observed = any(e is not None for e in errors)
    assert observed == documented, f"{sentence}; observed {errors}"


def test_groups_cover_the_seed_table() -> None:
    assert {frozenset((r, c)) for i, r in enumerate(GROUPS) for c in GROUPS[i:]} == set(
        DOCUMENTED_SENTENCE
    )


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_update_and_delete_on_dates(spark: SparkSession, tmp_path: Path, partitioned: bool) -> None:
    """The documents: 'UPDATE table WHERE date > '2010-01-01' ... y DELETE table WHERE date <
    '2010-01-01', estarán en conflicto si la tabla no tiene particiones por fecha ... La
    creación de particiones de la tabla por date evitará el conflicto.'"""
    outcome = update_delete_by_date(spark, tmp_path / "t", partitioned=partitioned)
    assert outcome.agrees, outcome


@pytest.mark.parametrize("explicit", [False, True], ids=["join-keys-only", "explicit-partition"])
def test_merge_example(spark: SparkSession, tmp_path: Path, explicit: bool) -> None:
    """The documents: the MERGE with only join keys 'puede examinar toda la tabla' and conflict;
    with t.date and t.country in the condition 'es seguro ejecutar esta operación
    simultáneamente en diferentes fechas y países'."""
    outcome = merge_by_partition(spark, tmp_path / "t", explicit=explicit)
    assert outcome.agrees, outcome
    if not explicit:
        assert outcome.message is not None and "Hint:" in outcome.message


@pytest.mark.parametrize("level", LEVELS, ids=[lvl.value for lvl in LEVELS])
def test_txn1_txn2(spark: SparkSession, tmp_path: Path, level: IsolationLevel) -> None:
    """The documents: 'En el nivel serializable, un lector nunca vería los datos insertados por
    txn2, pero, en el nivel WriteSerializable, un lector podría ver ... los datos insertados
    por txn2.'"""
    outcome = txn1_txn2(spark, tmp_path / "t", level=level)
    assert outcome.agrees, outcome
    visible = outcome.detail.endswith("yes")
    assert visible == (level is IsolationLevel.WRITE_SERIALIZABLE)
