"""The driver's MERGE join on keys agrees with a join row by row, NULL keys matching nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltatx.kernel.actions import AddFile
from deltatx.kernel.schema import parse_schema
from deltatx.log.row_level.arrow_join import FILE, ROW, SOURCE_ROW, key_kinds, key_matches
from deltatx.storage.location import Location

SCHEMA = parse_schema(
    '{"type":"struct","fields":['
    '{"name":"id","type":"long","nullable":true,"metadata":{}},'
    '{"name":"s","type":"string","nullable":true,"metadata":{}},'
    '{"name":"d","type":"double","nullable":true,"metadata":{}}]}'
)
_TYPES = pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.float64())])


# Strings in byte order (as the join's ranges compare them), non-ASCII ones among them.
_STRINGS = ["", "A", "Z", "a", "ab", "b", "z", "ä", "é", "€"]


def _write(
    root: Path, pick: random.Random, files: int, *, clustered: bool = False
) -> tuple[list[AddFile], list[list[dict[str, object]]]]:
    adds, contents = [], []
    for i in range(files):
        # Clustered files hold overlapping windows of keys, as a table sorted by them does.
        ids = range(4 * i, 4 * i + 6) if clustered else range(6)
        strings = _STRINGS[2 * i : 2 * i + 4] if clustered else ["a", "b"]
        rows = [
            {
                "id": pick.choice([None, *ids]),
                "s": pick.choice([None, *strings]),
                "d": pick.random(),
            }
            for _ in range(pick.randrange(0, 30))
        ]
        name = f"part-{i}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=_TYPES), root / name)
        adds.append(AddFile(name, {}, (root / name).stat().st_size, 0, True))
        contents.append(rows)
    return adds, contents


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("keys", [["id"], ["id", "s"], ["s"]])
@pytest.mark.parametrize("clustered", [False, True])
def test_key_matches_is_the_row_by_row_join(
    tmp_path: Path, seed: int, keys: list[str], clustered: bool
) -> None:
    pick = random.Random(seed)
    adds, contents = _write(tmp_path, pick, pick.randrange(1, 5), clustered=clustered)
    ids = range(-2, 20) if clustered else range(6)
    strings = _STRINGS if clustered else ["a", "b"]
    source = [
        {"id": pick.choice([None, *ids]), "s": pick.choice([None, *strings])}
        for _ in range(pick.randrange(0, 40 if clustered else 12))
    ]
    source_keys = [pa.array([row[k] for row in source], _TYPES.field(k).type) for k in keys]

    found = key_matches(
        Location.of(str(tmp_path)), adds, SCHEMA, keys, source_keys, column_mapping="none"
    )

    assert found is not None
    expected = sorted(
        (f, r, s)
        for f, rows in enumerate(contents)
        for r, row in enumerate(rows)
        for s, src in enumerate(source)
        if all(row[k] is not None and row[k] == src[k] for k in keys)
    )
    got = sorted(
        zip(
            found.column(FILE).to_pylist(),
            found.column(ROW).to_pylist(),
            found.column(SOURCE_ROW).to_pylist(),
            strict=True,
        )
    )
    assert got == expected


def test_a_key_the_driver_cannot_join_exactly_is_left_to_spark(tmp_path: Path) -> None:
    adds, _ = _write(tmp_path, random.Random(1), 1)
    assert key_kinds(SCHEMA, ["d"]) is None
    found = key_matches(
        Location.of(str(tmp_path)),
        adds,
        SCHEMA,
        ["d"],
        [pa.array([0.5], pa.float64())],
        column_mapping="none",
    )
    assert found is None
