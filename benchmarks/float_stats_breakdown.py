"""Not in ``make bench``: the CPU the statistics of floating point columns add to a task's write.

Files deltatx writes with pyarrow get no footer min/max for floating point leaves (a NaN would
be lost to Spark's pushed filters); their log statistics are gathered from each batch instead.
This times, interleaved in one process, with ``time.process_time``, the writing of ``--rows``
rows in Spark's Arrow batches (10,000 rows) of ``id BIGINT, v DOUBLE (1% NaN), f FLOAT,
s STRING``:

* ``footer only``: a plain ``pq.ParquetWriter`` with every footer statistic (the floor);
* ``footer + NaN scan``: the same plus a NaN scan of each float column per batch, as the
  ``format("delta")`` task writer did before (``nan_columns_of``);
* ``DataFileWriter``: no float footer statistics, float statistics from the data;
* ``TaskFiles``: the whole ``format("delta")`` task write (conform, write, footer read back,
  ``stats`` JSON) through :class:`deltatx.spark.datasource.task_files.TaskFiles`.

``python -m benchmarks.float_stats_breakdown --rows 1000000 --runs 5``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltatx.spark.data_file_writer import DataFileWriter
from deltatx.spark.datasource.task_files import TaskFiles, WritePlan

_BATCH_ROWS = 10_000
_SCHEMA_JSON = (
    '{"type":"struct","fields":['
    '{"name":"id","type":"long","nullable":true,"metadata":{}},'
    '{"name":"v","type":"double","nullable":true,"metadata":{}},'
    '{"name":"f","type":"float","nullable":true,"metadata":{}},'
    '{"name":"s","type":"string","nullable":true,"metadata":{}}]}'
)


def batches(rows: int) -> list[pa.RecordBatch]:
    """The rows in Spark's Arrow batches."""
    rng = np.random.default_rng(7)
    v = rng.normal(size=rows)
    v[rng.random(rows) < 0.01] = np.nan
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "v": pa.array(v, mask=rng.random(rows) < 0.05),
            "f": pa.array(rng.normal(size=rows).astype(np.float32)),
            "s": pa.array([f"k{i % 1000}" for i in range(rows)]),
        }
    )
    return table.to_batches(max_chunksize=_BATCH_ROWS)


def _footer_only(folder: Path, parts: list[pa.RecordBatch]) -> None:
    with pq.ParquetWriter(folder / "a.parquet", parts[0].schema, compression="snappy") as w:
        for batch in parts:
            w.write_table(pa.Table.from_batches([batch]))


def _footer_and_nan_scan(folder: Path, parts: list[pa.RecordBatch]) -> None:
    nans: set[str] = set()
    with pq.ParquetWriter(folder / "b.parquet", parts[0].schema, compression="snappy") as w:
        for batch in parts:
            table = pa.Table.from_batches([batch])
            for name in ("v", "f"):
                if pc.any(pc.is_nan(table.column(name))).as_py():
                    nans.add(name)
            w.write_table(table)


def _data_file_writer(folder: Path, parts: list[pa.RecordBatch]) -> None:
    writer = DataFileWriter(str(folder / "c.parquet"), parts[0].schema, first=parts[0])
    for batch in parts:
        writer.write_table(pa.Table.from_batches([batch]))
    writer.close()


def _task_files(folder: Path, parts: list[pa.RecordBatch]) -> None:
    plan = WritePlan(
        table_path=str(folder / "table"),
        read_version=-1,
        schema_json=_SCHEMA_JSON,
        partition_columns=(),
        replace_where=None,
        predicate=None,
    )
    files = TaskFiles(plan)
    for batch in parts:
        files.add(batch)
    files.close()


VARIANTS: dict[str, Callable[[Path, list[pa.RecordBatch]], None]] = {
    "footer only": _footer_only,
    "footer + NaN scan": _footer_and_nan_scan,
    "DataFileWriter": _data_file_writer,
    "TaskFiles": _task_files,
}


def main() -> None:
    """Prints each variant's median CPU seconds and its ratio to ``footer + NaN scan``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    parts = batches(args.rows)
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for run in range(args.runs + 1):  # the first round warms up
        for name, variant in VARIANTS.items():
            with tempfile.TemporaryDirectory() as folder:
                start = time.process_time()
                variant(Path(folder), parts)
                if run:
                    cpu[name].append(time.process_time() - start)
    base = statistics.median(cpu["footer + NaN scan"])
    print(f"{args.rows:,} rows, {len(parts)} batches, median of {args.runs} runs (CPU s)")
    for name, times in cpu.items():
        median = statistics.median(times)
        print(f"  {name:<20} {median:7.3f}   x{median / base:5.2f}   {sorted(times)}")


if __name__ == "__main__":
    main()
