"""Footer statistics of files pyarrow wrote: a NaN leaves its column without bounds.

pyarrow's footer bounds skip NaN, while Spark orders NaN above every number; a bound that
ignores a NaN would let a scan skip a file holding rows ``d > 100`` matches.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.spark.stats import file_stats_json, nan_columns_of


def test_a_nan_leaves_a_column_without_bounds(tmp_path: Path) -> None:
    table = pa.table({"d": [1.5, float("nan"), 3.0], "e": [1.0, 2.0, None]})
    path = f"{tmp_path}/f.parquet"
    pq.write_table(table, path)
    schema = StructType(
        (StructField("d", PrimitiveType("double")), StructField("e", PrimitiveType("double")))
    )
    nans = nan_columns_of(table)
    assert nans == {("d",)}
    stats = file_stats_json(pq.read_metadata(path), schema, nan_columns=nans)
    assert stats == (
        '{"numRecords":3,"minValues":{"e":1.0},"maxValues":{"e":2.0},"nullCount":{"d":0,"e":1}}'
    )
