"""A batch of files read column by column gives each file the bounds evaluation gives it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deltatx.kernel import evaluation, file_columns
from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import _FileView
from deltatx.kernel.file_columns import ColumnReader
from deltatx.kernel.schema import PrimitiveType, StructField, StructType

from ..examples import examples

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
    _assert_agrees_with_the_file_view(FILES, name)


def _assert_agrees_with_the_file_view(files: list[AddFile], name: str) -> None:
    batch = ColumnReader(SCHEMA, ["p"]).read(files)
    bounds = batch.column(name)
    for i, f in enumerate(files):
        parsed = evaluation.parse_stats(f.stats, exact=False) if f.stats else None
        rows = evaluation.num_records_of(parsed) if isinstance(parsed, dict) else None
        assert batch.num_records(i) == rows
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


# Statistics as writers and odd logs spell them: keys in other cases, bounds of other types,
# missing parts, escaped keys, repeated keys, unreadable text.
_KEYS = st.sampled_from(["id", "ID", "Id", "s", "S"])
_VALUES = st.one_of(
    st.integers(-3, 3),
    st.floats(-3, 3),
    st.sampled_from(["a", "b", "id"]),
    st.none(),
    st.booleans(),
)
_BOUNDS = st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=3), st.none(), st.integers(0, 2))
_ODD_STATS = st.fixed_dictionaries(
    {},
    optional={
        "numRecords": st.one_of(st.integers(0, 4), st.booleans(), st.none()),
        "minValues": _BOUNDS,
        "maxValues": _BOUNDS,
        "nullCount": st.one_of(
            st.dictionaries(_KEYS, st.one_of(st.integers(0, 4), st.none(), st.booleans())),
            st.integers(0, 2),
        ),
    },
)


@st.composite
def _plain_stats(draw: st.DrawFn) -> dict[str, Any]:
    """What writers write: every bound of its column's type, keys as the schema spells them."""
    ids = sorted(draw(st.lists(st.integers(-3, 3), min_size=2, max_size=2)))
    texts = sorted(draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=2)))
    # A row count as odd logs write it now and then: a boolean, a null.
    rows = draw(st.one_of(st.integers(0, 4), st.integers(0, 4), st.just(True), st.none()))
    return {
        "numRecords": rows,
        "minValues": {"id": ids[0], "s": texts[0], "v": 0.5},
        "maxValues": {"id": ids[1], "s": texts[1], "v": 1.5},
        "nullCount": {"id": draw(st.integers(0, 4)), "s": draw(st.integers(0, 4))},
    }


@st.composite
def _stats_text(draw: st.DrawFn) -> str | None:
    obj = draw(st.one_of(_plain_stats(), _plain_stats(), _ODD_STATS))
    text = json.dumps(obj, separators=(",", ":"))
    change = draw(
        st.sampled_from(
            [
                "none",
                "none",
                "escape",
                "other case",
                "escaped case",
                "repeat",
                "unreadable",
                "line break",
                "two objects",
            ]
        )
    )
    if change == "escape":
        text = text.replace('"id"', '"\\u0069d"', 1)
    elif change == "other case":  # the last of the keys equal but for case wins
        text = text.replace(',"v":0.5}', ',"v":0.5,"ID":7}', 1)
    elif change == "escaped case":
        text = text.replace(',"v":0.5}', ',"v":0.5,"\\u0049D":7}', 1)
    elif change == "repeat":  # a key written twice: the last one wins
        text = text.replace('"id":', f'"id":{draw(st.integers(-3, 3))},"id":', 1)
    elif change == "unreadable":
        text = draw(st.sampled_from(["", " ", "{not json", "[1]", '{"numRecords":NaN}']))
    elif change == "line break":  # valid JSON, but not one line of a batch
        text = text.replace(",", ",\n", 1)
    elif change == "two objects":  # unreadable, though each of its lines reads
        text = text + "\n" + text
    return text


@settings(max_examples=examples(600))
@given(
    texts=st.lists(_stats_text(), min_size=1, max_size=5), name=st.sampled_from(["id", "ID", "s"])
)
def test_statistics_read_typed_agree_with_the_file_view(texts: list[str], name: str) -> None:
    files = [_file(str(i), text) for i, text in enumerate(texts)]
    _assert_agrees_with_the_file_view(files, name)


# Partition values as odd logs write them: keys in other cases, two spellings of one column
# (the last wins), another column, none at all.
_PARTITION_VALUES = st.one_of(
    st.fixed_dictionaries({"p": st.sampled_from(["1", "2", None, "x"])}),
    st.fixed_dictionaries({"P": st.sampled_from(["1", "3"])}),
    st.just({"p": "1", "P": "4"}),
    st.just({"P": "4", "p": "1"}),
    st.just({"q": "1"}),
    st.just({}),
    # Two partition columns, in either order, or another second one.
    st.fixed_dictionaries({"p": st.sampled_from(["1", "5"]), "q": st.just("2")}),
    st.just({"q": "2", "p": "6"}),
    st.just({"p": "7", "r": "2"}),
)


@settings(max_examples=examples(300))
@given(values=st.lists(_PARTITION_VALUES, min_size=1, max_size=6))
@example(values=[{"p": "1", "P": "4"}, {"P": "4", "p": "1"}])  # one key set, two readings
@example(values=[{"p": "1", "q": "2"}, {"q": "2", "p": "3"}, {"p": "4", "r": "2"}])
def test_partition_values_agree_with_the_file_view(values: list[dict[str, str | None]]) -> None:
    files = [
        AddFile(
            path=f"f-{i}.parquet",
            partition_values=v,
            size=1,
            modification_time=0,
            data_change=True,
            stats=None,
        )
        for i, v in enumerate(values)
    ]
    _assert_agrees_with_the_file_view(files, "p")


def _whole_parses(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The statistics texts parsed as whole objects from now on, in order."""
    parsed: list[str | None] = []
    real = file_columns.parse_stats_objects

    def counting(texts: list[str | None], *, exact: bool) -> Any:
        parsed.extend(texts)
        return real(texts, exact=exact)

    monkeypatch.setattr(file_columns, "parse_stats_objects", counting)
    return parsed


def test_null_counts_the_typed_reader_refuses_are_read_by_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bounds are read typed, and the counts only when asked: a null count that is not an
    # object (the rule ignores it, so the file may hold values) sends them to the rule.
    parsed = _whole_parses(monkeypatch)
    files = [
        _file("1", '{"numRecords":4,"minValues":{"id":1},"maxValues":{"id":9},"nullCount":3}'),
        _file(
            "2", '{"numRecords":2,"minValues":{"id":5},"maxValues":{"id":6},"nullCount":{"id":2}}'
        ),
    ]
    batch = ColumnReader(SCHEMA, ["p"]).read(files)
    ids = batch.column("id")
    assert (ids.lo, ids.hi) == ([1, 5], [9, 6])
    assert parsed == []
    assert ids.valued == [True, False]
    assert [batch.num_records(i) for i in range(2)] == [4, 2]
    assert parsed == [f.stats for f in files]
    _assert_agrees_with_the_file_view(files, "id")


def test_statistics_over_several_lines_are_read_by_the_rule() -> None:
    # One file's text is blank and the next holds two objects: read one line per file, the
    # second object would pass for the second file's statistics.
    one = '{"numRecords":2,"minValues":{"id":1},"maxValues":{"id":9}}'
    files = [_file("1", " "), _file("2", one + "\n" + one.replace("9", "7"))]
    _assert_agrees_with_the_file_view(files, "id")
    assert ColumnReader(SCHEMA, ["p"]).read(files).column("id").lo == [None, None]


def test_a_key_spelled_beyond_ascii_sends_the_batch_to_the_rule() -> None:
    # The Kelvin sign lower-cases to "k": the rule reads it as another spelling of "k", and
    # as the last one it wins.
    schema = StructType((StructField("k", PrimitiveType("long")),))
    text = '{"numRecords":2,"minValues":{"k":1,"\u212a":5},"maxValues":{"k":9}}'
    files = [
        _file("1", '{"numRecords":2,"minValues":{"k":1},"maxValues":{"k":9}}'),
        _file("2", text),
    ]
    assert "\\" not in text  # the sign spelled as it is, not escaped
    bounds = ColumnReader(schema, []).read(files).column("k")
    expected = [_FileView(f, schema, []).column("k") for f in files]
    assert bounds.lo == [r.lo.value for r in expected] == [1, 5]
    assert bounds.hi == [r.hi.value for r in expected] == [9, 9]


def test_plain_statistics_are_read_without_parsing_whole_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _whole_parses(monkeypatch)
    files = [
        _file(
            "1",
            {
                "numRecords": 4,
                "minValues": {"id": 1, "s": "a"},
                "maxValues": {"id": 9, "s": "c"},
                "nullCount": {"id": 0, "s": 4},
            },
        ),
        _file(
            "2",
            {"numRecords": 2, "minValues": {"id": -5, "s": "b"}, "maxValues": {"id": 0, "s": "b"}},
        ),
    ]
    batch = ColumnReader(SCHEMA, ["p"]).read(files)
    ids, texts = batch.column("id"), batch.column("s")
    assert (ids.lo, ids.hi, ids.unknown, ids.valued) == (
        [1, -5],
        [9, 0],
        [False, False],
        [True, True],
    )
    assert (texts.lo, texts.hi, texts.valued) == (["a", "b"], ["c", "b"], [False, True])
    assert [batch.num_records(i) for i in range(2)] == [4, 2]
    assert parsed == []
    # A file that needs the rule sends its whole batch there, each file parsed once.
    files.append(_file("3", {"numRecords": 1, "minValues": {"ID": 3}, "maxValues": {"ID": 3}}))
    assert ColumnReader(SCHEMA, ["p"]).read(files).column("id").lo == [1, -5, 3]
    assert parsed == [f.stats for f in files]
