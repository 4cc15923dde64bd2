"""Deletion vectors across engines, REORG PURGE, and turning deletion vectors on.

* delta-rs reads the deletion vectors deltatx writes (its ``to_pyarrow_table`` refuses the
  ``deletionVectors`` reader feature in 1.6.6; its DataFusion ``QueryBuilder`` honours it);
* deltatx reads a table built by hand whose vectors were produced independently (pyroaring,
  our own framing and Z85), stored inline (``i``) and in a DV file (``u``);
* ``reorg_purge`` rewrites the files that carry vectors (dataChange=false, rows unchanged);
* setting ``delta.enableDeletionVectors`` on an existing table upgrades the protocol in a
  commit of its own, and is refused together with data changes.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder
from pyroaring import BitMap
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile, Metadata, ProtocolAction, RemoveFile

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_MAGIC = 1681511377  # RoaringBitmapArray, portable format


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ RFC 32) of ``data`` zero-padded to a multiple of four bytes."""
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(padded), 4):
        (value,) = struct.unpack(">I", padded[i : i + 4])
        chars = []
        for _ in range(5):
            value, rem = divmod(value, 85)
            chars.append(_Z85[rem])
        out.append("".join(reversed(chars)))
    return "".join(out)


def bitmap_bytes(rows: list[int]) -> bytes:
    """The portable RoaringBitmapArray: magic, bucket count, then (high key, 32-bit bitmap)."""
    buckets: dict[int, list[int]] = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<I", _MAGIC) + struct.pack("<Q", len(buckets))
    for high in sorted(buckets):
        out += struct.pack("<I", high) + BitMap(buckets[high]).serialize()
    return out


def _ids(dt: DeltaTable) -> list[int]:
    return sorted(int(r["id"]) for r in dt.to_df().select("id").collect())


def _rs_ids(path: str) -> list[int]:
    table = RsTable(path)
    assert "deletionVectors" in (table.protocol().reader_features or [])
    reader = QueryBuilder().register("t", table).execute("SELECT id FROM t")
    return sorted(pa.table(reader.read_all()).column("id").to_pylist())


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
def test_delta_rs_sees_the_rows_deltatx_sees(
    spark: SparkSession, table_dir: Path, partitioned: bool
) -> None:
    path = str(table_dir)
    data = spark.range(0, 200).select("id", (F.col("id") % 3).alias("p"), F.col("id").alias("v"))
    for part in range(2):
        deltatx.write(
            data.filter(F.col("id") % 2 == part).coalesce(1),
            path,
            partition_by=["p"] if partitioned else None,
        )
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 7 = 0")
    dt.update("id % 5 = 0", {"v": "-v"})
    dt.delete("id BETWEEN 100 AND 120")  # a second vector on files that already have one
    src = spark.createDataFrame([(i, 9, 0) for i in (3, 4, 1000)], "id BIGINT, p BIGINT, v BIGINT")
    (
        dt.alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    assert any(f.deletion_vector is not None for f in dt.snapshot().add_files())
    assert _rs_ids(path) == _ids(dt)
    dt.optimize().execute_compaction()
    assert _rs_ids(path) == _ids(dt)


def _write_hand_built_table(root: Path) -> list[int]:
    """Two data files, one with an inline vector and one with a vector in a DV file."""
    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    files = {"a.parquet": list(range(0, 10)), "b.parquet": list(range(100, 150))}
    for name, ids in files.items():
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
    inline_rows = [0, 3, 9]
    inline = bitmap_bytes(inline_rows)
    stored_rows = [1, 2, 40, 49]
    stored = bitmap_bytes(stored_rows)
    file_id = uuid.uuid4()
    dv_file = bytes([1]) + struct.pack(">I", len(stored)) + stored
    dv_file += struct.pack(">I", zlib.crc32(stored) & 0xFFFFFFFF)
    (root / f"deletion_vector_{file_id}.bin").write_bytes(dv_file)
    descriptors = {
        "a.parquet": {
            "storageType": "i",
            "pathOrInlineDv": z85(inline),
            "sizeInBytes": len(inline),
            "cardinality": len(inline_rows),
        },
        "b.parquet": {
            "storageType": "u",
            "pathOrInlineDv": z85(file_id.bytes),
            "offset": 1,
            "sizeInBytes": len(stored),
            "cardinality": len(stored_rows),
        },
    }
    actions: list[dict[str, object]] = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": 0,
            }
        },
    ]
    for name, ids in files.items():
        actions.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": (root / name).stat().st_size,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": len(ids)}),
                    "deletionVector": descriptors[name],
                }
            }
        )
    log = root / "_delta_log" / f"{0:020}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    live = [i for i in files["a.parquet"] if files["a.parquet"].index(i) not in inline_rows]
    live += [i for k, i in enumerate(files["b.parquet"]) if k not in stored_rows]
    return sorted(live)


def test_deltatx_reads_hand_built_vectors(spark: SparkSession, table_dir: Path) -> None:
    """Vectors made without deltatx (pyroaring, our own framing and Z85), ``i`` and ``u``."""
    expected = _write_hand_built_table(table_dir)
    dt = DeltaTable.for_path(spark, str(table_dir))
    assert _ids(dt) == expected
    # delta-rs agrees on the same hand-built bytes, so they are a fair yardstick.
    assert _rs_ids(str(table_dir)) == expected
    # and deltatx can keep writing to it: a further delete unions with the inline vector
    dt.delete("id = 5")
    assert _ids(dt) == [i for i in expected if i != 5]


def test_reorg_purge_drops_vectors_without_changing_rows(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(0, 100).coalesce(1), path)
    deltatx.write(spark.range(100, 150).coalesce(1), path)
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 3 = 0")
    before = _ids(dt)
    assert all(f.deletion_vector is not None for f in dt.snapshot().add_files())
    metrics = dt.reorg_purge()
    assert metrics.num_removed_files == 2
    assert _ids(dt) == before
    assert all(f.deletion_vector is None for f in dt.snapshot().add_files())
    actions = dt.log.read_commit(dt.version())
    files = [a for a in actions if isinstance(a, AddFile | RemoveFile)]
    assert files and all(a.data_change is False for a in files)
    assert dt.history(1).collect()[0]["operation"] == "REORG"
    assert _rs_ids(path) == before
    # nothing left to purge: a second REORG rewrites nothing
    assert dt.reorg_purge().num_removed_files == 0


def test_enabling_deletion_vectors_upgrades_the_protocol_alone(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    deltatx.write(
        spark.range(0, 20).coalesce(1), path, properties={"delta.enableDeletionVectors": "false"}
    )
    dt = DeltaTable.for_path(spark, path)
    assert "deletionVectors" not in (dt.snapshot().protocol.writer_features or ())
    # with a data change in the same transaction: refused, nothing committed
    version = dt.version()
    txn = dt.begin()
    txn.set_properties({"delta.enableDeletionVectors": "true"})
    txn.delete("id = 1")
    with pytest.raises(InvalidArgumentError, match="commit the property change"):
        txn.commit()
    assert dt.version() == version
    # alone: one commit with the protocol and metadata actions and no file actions
    dt.set_properties({"delta.enableDeletionVectors": "true"})
    actions = dt.log.read_commit(dt.version())
    protocol = next(a for a in actions if isinstance(a, ProtocolAction))
    assert "deletionVectors" in (protocol.reader_features or ())
    assert "deletionVectors" in (protocol.writer_features or ())
    assert any(isinstance(a, Metadata) for a in actions)
    assert not any(isinstance(a, AddFile | RemoveFile) for a in actions)
    # and DML now writes vectors
    dt.delete("id = 1")
    assert any(f.deletion_vector is not None for f in dt.snapshot().add_files())
    assert 1 not in _ids(dt)
