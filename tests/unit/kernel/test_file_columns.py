"""A batch of files read column by column gives each file the bounds evaluation gives it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deltatx.kernel import evaluation, file_columns
from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import _FileView
from deltatx.kernel.file_columns import ColumnReader
from deltatx.kernel.schema import PrimitiveType, StructField, StructType

SCHEMA = StructType(
    (
        StructField("p", PrimitiveType("long")),
        StructField("id", PrimitiveType("long")),
        StructField("s", PrimitiveType("string")),
        StructField("d", PrimitiveType("date")),
    )
)


def _file(partition: str | None, stats: dict[str, Any] | str | None) -> AddFile:
    text = stats if isinstance(stats, str) or stats is None else json.dumps(stats)
    return AddFile(
        path=f"f-{partition}.parquet",
        partition_values={"p": partition},
        size=1,
        modification_time=0,
        data_change=True,
        stats=text,
    )


FILES = [
    _file("1", {"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 9}}),
    # Upper-case names, a bound written as a float, a NULL-only column.
    _file(
        "2",
        {
            "numRecords": 2,
            "minValues": {"ID": 4.0, "S": "a", "d": "2024-01-02"},
            "maxValues": {"ID": 5, "S": "b", "d": "2024-01-03"},
            "nullCount": {"ID": 0, "s": 2},
        },
    ),
    _file(None, None),  # a NULL partition, no statistics
    _file("x", "{not json"),  # an unreadable partition value and statistics
    # Two keys for one column: the last one wins, as when keys are lower-cased.
    _file("3", '{"numRecords":1,"minValues":{"id":1,"Id":7},"maxValues":{"id":8}}'),
]


@pytest.mark.parametrize("name", ["p", "id", "s", "d", "ID", "missing"])
def test_columns_agree_with_the_file_view(name: str) -> None:
    bounds = ColumnReader(SCHEMA, ["p"]).read(FILES).column(name)
    for i, f in enumerate(FILES):
        rng = _FileView(f, SCHEMA, ["p"]).column(name)
        if rng is None or rng.kind is None:
            assert (bounds.lo[i], bounds.hi[i], bounds.valued[i]) == (None, None, True)
            assert bounds.unknown[i]
            continue
        assert not bounds.unknown[i]
        assert bounds.lo[i] == (None if rng.lo is None else rng.lo.value)
        assert bounds.hi[i] == (None if rng.hi is None else rng.hi.value)
        assert bounds.valued[i] == rng.may_have_value
    assert bounds.all_valued == all(bounds.valued)
    assert bounds.lo_bounded == (None not in bounds.lo)


def test_statistics_are_parsed_once_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str | None] = []
    real, real_batch = file_columns.parse_stats, file_columns.parse_stats_objects

    def counting(text: str, *, exact: bool) -> Any:
        calls.append(text)
        return real(text, exact=exact)

    def counting_batch(texts: list[str | None], *, exact: bool) -> Any:
        calls.extend(texts)
        return real_batch(texts, exact=exact)

    monkeypatch.setattr(file_columns, "parse_stats", counting)
    monkeypatch.setattr(file_columns, "parse_stats_objects", counting_batch)
    batch = ColumnReader(SCHEMA, ["p"]).read(FILES[:2])
    for name in ("id", "s", "id", "d"):
        batch.column(name)
    assert [batch.num_records(i) for i in range(2)] == [3, 2]
    # One parse per file, plus one exact re-read for the bound written as a float.
    assert len(calls) == 3


def test_num_records_and_partition_values_of_odd_files() -> None:
    batch = ColumnReader(SCHEMA, ["p"]).read(FILES)
    assert batch.num_records(4) == 1
    assert batch.num_records(2) is None
    assert batch.column("p").lo == [1, 2, None, None, 3]


@pytest.mark.parametrize("exact", [False, True])
def test_statistics_parsed_together_agree_with_one_by_one(exact: bool) -> None:
    texts = [
        None,
        "",
        '{"numRecords":2,"minValues":{"id":1.5}}',
        "[1, 2]",  # JSON, but not an object
        '{"numRecords":NaN}',  # only the standard parser reads it
        '{"numRecords":123456789012345678901234567890}',  # beyond 64 bits
        "{not json",
    ]
    expected = []
    for text in texts:
        parsed = evaluation.parse_stats(text, exact=exact) if text else None
        expected.append(parsed if isinstance(parsed, dict) else None)
    got = evaluation.parse_stats_objects(texts, exact=exact)
    assert repr(got) == repr(expected)
