"""format("delta") planning without Spark: pushed filters -> predicates, files -> tasks."""

from __future__ import annotations

import json
import pickle

import pytest
from pyspark.sql import datasource as ds

from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.spark.datasource.filters import conjunction, to_predicate
from deltatx.spark.datasource.reader import FilesPartition, plan_partitions
from deltatx.spark.partition_dirs import partition_value_text

SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField("p", PrimitiveType("integer")),
        StructField("s", PrimitiveType("string")),
    )
)


def _file(p: int | None, lo: int, hi: int, *, nulls: int = 0, size: int = 100) -> AddFile:
    stats = {
        "numRecords": 10,
        "minValues": {"id": lo},
        "maxValues": {"id": hi},
        "nullCount": {"id": nulls},
    }
    return AddFile(
        path=f"p={p}/f{lo}.parquet",
        partition_values={"p": None if p is None else str(p)},
        size=size,
        modification_time=0,
        data_change=True,
        stats=json.dumps(stats),
    )


FILES = [_file(1, 0, 9), _file(2, 10, 19), _file(3, 20, 29, nulls=2), _file(None, 30, 39)]


@pytest.mark.parametrize(
    ("filters", "kept"),
    [
        ([ds.EqualTo(("p",), 2)], [1]),
        ([ds.EqualNullSafe(("p",), 3)], [2]),
        ([ds.In(("p",), (1, 3))], [0, 2]),
        ([ds.GreaterThan(("id",), 25)], [2, 3]),
        ([ds.GreaterThanOrEqual(("id",), 19), ds.LessThan(("id",), 20)], [1]),
        ([ds.LessThanOrEqual(("id",), 0)], [0]),
        ([ds.IsNull(("p",))], [3]),
        ([ds.IsNotNull(("p",))], [0, 1, 2]),
        ([ds.IsNull(("id",))], [2]),
        ([ds.Not(ds.EqualTo(("p",), 1))], [1, 2]),
        # Cannot skip: nested paths, arrays and patterns keep every file.
        ([ds.EqualTo(("s", "x"), 1)], [0, 1, 2, 3]),
        ([ds.EqualTo(("id",), [1, 2])], [0, 1, 2, 3]),
        ([ds.StringStartsWith(("s",), "a")], [0, 1, 2, 3]),
    ],
)
def test_pushed_filters_keep_only_files_that_may_match(
    filters: list[ds.Filter], kept: list[int]
) -> None:
    predicate = conjunction(filters)
    if predicate is None:
        got = list(range(len(FILES)))
    else:
        got = [
            i
            for i, f in enumerate(FILES)
            if file_may_match(predicate, f, schema=SCHEMA, partition_columns=["p"])
        ]
    assert got == kept


def test_unconvertible_filters_become_none() -> None:
    assert to_predicate(ds.StringContains(("s",), "x")) is None
    assert to_predicate(ds.Not(ds.StringEndsWith(("s",), "x"))) is None
    assert conjunction([ds.StringContains(("s",), "x")]) is None


def test_tasks_pack_files_by_size_and_keep_every_file() -> None:
    big = [_file(i, i * 10, i * 10 + 9, size=100 * 1024 * 1024) for i in range(4)]
    small = [_file(i, i, i, size=1024) for i in range(10, 30)]
    tasks = plan_partitions(big + small)
    paths = sorted(f.path for t in tasks for f in t.files)
    assert paths == sorted(f.path for f in big + small)
    # Four 100 MB files cannot share a 128 MB task.
    assert sum(1 for t in tasks if any(f.size > 1024 for f in t.files)) == 4


def test_a_task_carries_the_descriptor_not_the_rows() -> None:
    def with_dv(cardinality: int) -> FilesPartition:
        dv = DeletionVectorDescriptor("u", "ab" * 10, 1000, cardinality, offset=1)
        f = _file(1, 0, 9)
        add = AddFile(
            path=f.path,
            partition_values=f.partition_values,
            size=f.size,
            modification_time=0,
            data_change=True,
            stats=f.stats,
            deletion_vector=dv,
        )
        (task,) = plan_partitions([add])
        return task

    small, large = pickle.dumps(with_dv(1)), pickle.dumps(with_dv(5_000_000))
    assert abs(len(large) - len(small)) <= 8


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        (True, "true"),
        (7, "7"),
        ("a b", "a b"),
    ],
)
def test_partition_values_are_spelt_as_the_log_spells_them(value: object, text: str | None) -> None:
    assert partition_value_text(value) == text


def test_dates_and_timestamps_are_spelt_in_utc() -> None:
    from datetime import UTC, date, datetime, timedelta, timezone

    assert partition_value_text(date(2024, 1, 2)) == "2024-01-02"
    aware = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert partition_value_text(aware) == "2024-01-02 01:04:05.000000"
    assert partition_value_text(datetime(2024, 1, 2, tzinfo=UTC)) == "2024-01-02 00:00:00.000000"
