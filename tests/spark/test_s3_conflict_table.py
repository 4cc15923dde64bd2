"""The documents' conflict table without row-level concurrency, run on a table on S3.

The same pairs as ``test_conflict_table.py`` (A begins and stages, B begins on the same
snapshot, stages and commits, then A commits), but the loser's commit meets the winner's
``N.json`` as a 412 from the conditional PUT, which must lead to the same conflict checking as
on local files. The default run covers one representative pair per outcome; ``make stress``
(``DELTATX_STRESS_FULL``) runs every cell at both isolation levels.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession

from deltatx.demo.conflicts import (
    DOCUMENTED_SENTENCE,
    LEVELS,
    Op,
    build_template,
    documented_without_row_level,
    run_pair,
)
from deltatx.kernel.isolation import IsolationLevel
from deltatx.storage.s3 import shared_client_and_filesystem, split

pytestmark = pytest.mark.s3

OPS = tuple(Op)
ALL_PAIRS = [(a, b) for i, a in enumerate(OPS) for b in OPS[i:]]
# Documented as conflicting and as not conflicting, across the groups.
SOME_PAIRS = [
    (Op.INSERT, Op.INSERT),
    (Op.UPDATE, Op.DELETE),
    (Op.INSERT, Op.OPTIMIZE),
    (Op.MERGE, Op.OPTIMIZE),
]
FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
PAIRS = ALL_PAIRS if FULL else SOME_PAIRS
RUN_LEVELS = LEVELS if FULL else (IsolationLevel.WRITE_SERIALIZABLE,)


def _copy(source: str, target: str) -> None:
    client = shared_client_and_filesystem()[0]
    bucket, prefix = split(source)
    _, target_prefix = split(target)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    for page in pages:
        for item in page.get("Contents", []):
            key = target_prefix + item["Key"][len(prefix) :]
            client.copy_object(
                Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": item["Key"]}
            )


@pytest.fixture(scope="module")
def templates(spark: SparkSession, s3_server: str) -> dict[IsolationLevel, str]:
    bucket = f"conflicts-{uuid.uuid4().hex[:12]}"
    shared_client_and_filesystem()[0].create_bucket(Bucket=bucket)
    out = {}
    for level in RUN_LEVELS:
        root = f"s3://{bucket}/template-{level.value}"
        build_template(spark, root, level)
        out[level] = root
    return out


@pytest.mark.parametrize("level", RUN_LEVELS, ids=[lvl.value for lvl in RUN_LEVELS])
@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.value}-{b.value}" for a, b in PAIRS])
def test_cell_on_s3(
    spark: SparkSession,
    templates: dict[IsolationLevel, str],
    level: IsolationLevel,
    a: Op,
    b: Op,
) -> None:
    documented = documented_without_row_level(a.group, b.group, level)
    sentence = DOCUMENTED_SENTENCE[frozenset((a.group, b.group))]
    orders = [(a, b)] if a is b else [(a, b), (b, a)]
    errors: list[Any] = []
    for first, second in orders:
        table = f"{templates[level]}-{first.value}-{second.value}-{uuid.uuid4().hex[:6]}"
        _copy(templates[level], table)
        outcome = run_pair(spark, table, first=first, second=second, level=level)
        if second is Op.INSERT:
            assert outcome.error is None, "a blind INSERT never fails: " + sentence
        errors.append(outcome.error)
    observed = any(e is not None for e in errors)
    assert observed == documented, f"{sentence}; observed {errors}"
