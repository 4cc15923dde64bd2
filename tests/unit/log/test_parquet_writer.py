"""Data files pyarrow writes: no footer bounds that ignore a NaN."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.log.parquet_writer import open_parquet_writer, statistics_columns


def test_floating_point_and_nested_leaves_get_no_bounds(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("d", pa.float64()),
            ("f", pa.float32()),
            ("s", pa.struct([("x", pa.string()), ("y", pa.float64())])),
            ("l", pa.list_(pa.int32())),
        ]
    )
    assert statistics_columns(schema) == ["i", "s.x"]
    table = pa.table(
        {
            "i": [1, 2, 3],
            "d": [1.5, math.nan, 3.0],
            "f": [math.nan, 0.5, 1.0],
            "s": [{"x": "a", "y": 1.0}, {"x": "b", "y": math.nan}, None],
            "l": [[1], [], None],
        },
        schema=schema,
    )
    path = tmp_path / "f.parquet"
    with open_parquet_writer(str(path), schema) as writer:
        writer.write_table(table)
    group = pq.read_metadata(path).row_group(0)
    stats = {
        group.column(c).path_in_schema: group.column(c).statistics for c in range(group.num_columns)
    }
    assert stats["i"] is not None and (stats["i"].min, stats["i"].max) == (1, 3)
    assert stats["s.x"] is not None and (stats["s.x"].min, stats["s.x"].max) == ("a", "b")
    for leaf in ("d", "f", "s.y", "l.list.element"):
        assert stats[leaf] is None or not stats[leaf].has_min_max, leaf
    assert group.column(0).compression == "SNAPPY"
    assert pq.read_table(path).column("i").to_pylist() == [1, 2, 3]
