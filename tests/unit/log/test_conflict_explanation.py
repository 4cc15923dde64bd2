"""`deltatx conflicts` on tables with deletion vectors names the rows (no Spark, no JVM).

Seed 000 (row-level concurrency): UPDATE, DELETE and MERGE "solo pueden entrar en conflicto
cuando intentan modificar la misma fila"; OPTIMIZE vs them "no puede entrar en conflicto"
without ZORDER BY. The explanation must say the same a real commit would, and for a row-level
collision which rows collided.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile, Metadata
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.provenance import SOURCES_TAG, encode_sources
from deltatx.log.conflict_explanation import Explanation, explain_conflicts
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.expressions import parse_condition
from deltatx.storage import LocalLogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
)


def _data_file(root: Path, name: str, ids: list[int]) -> AddFile:
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i * 10 for i in ids])}),
        root / name,
    )
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids), "v": min(ids) * 10},
        "maxValues": {"id": max(ids), "v": max(ids) * 10},
        "nullCount": {"id": 0, "v": 0},
    }
    return AddFile(
        path=name,
        partition_values={},
        size=(root / name).stat().st_size,
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps(stats),
    )


def _append(log: DeltaLog, *files: AddFile) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files(list(files))
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    return txn.commit()


def _table(tmp_path: Path, level: str = "WriteSerializable") -> tuple[DeltaLog, AddFile]:
    root = tmp_path / "t"
    root.mkdir()
    conf = {"delta.enableDeletionVectors": "true", "delta.isolationLevel": level}
    log = DeltaLog.for_table(str(root), store=LocalLogStore(fsync=False))
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(protocol_for_configuration(conf, DEFAULT_PROTOCOL))
    txn.update_metadata(
        Metadata(
            id="11111111-2222-3333-4444-555555555555",
            schema_string=SCHEMA,
            partition_columns=(),
            configuration=conf,
            created_time=int(time.time() * 1000),
        )
    )
    f = _data_file(root, "part-0.parquet", list(range(10)))
    txn.add_files([f])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    return log, f


def _delete_rows(log: DeltaLog, f: AddFile, rows: set[int]) -> int:
    """A winner that deletes ``rows`` of ``f`` through its deletion vector, as DV DML does."""
    current = next(a for a in log.snapshot().add_files() if a.path == f.path)
    [dv] = write_dvs(log, [DvReader(log).rows_of(current) | rows])
    txn = OptimisticTransaction(log, log.snapshot())
    txn.remove_files([current])
    txn.add_files([replace(current, deletion_vector=dv)])
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    return txn.commit()


def _explain(
    log: DeltaLog, operation: OperationName, condition: str | None, since: int = 0
) -> Explanation:
    snap = log.snapshot(since)
    predicate = None if condition is None else parse_condition(condition, schema=snap.schema)
    return explain_conflicts(
        log, snap, operation=operation, predicate=predicate, condition_text=condition
    )


def _files(root: Path) -> list[tuple[str, int]]:
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file()
    )


@pytest.mark.parametrize(
    "operation", [OperationName.DELETE, OperationName.UPDATE, OperationName.MERGE]
)
def test_same_rows_collide_and_name_the_rows(tmp_path: Path, operation: OperationName) -> None:
    """Seed 000: DML vs DML on a DV table conflicts only on the same row; the explanation
    names the rows both changed."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {2, 3})
    explained = _explain(log, operation, "id IN (3, 7)")
    assert explained.row_level and explained.matched_rows == {f.path: (3, 7)}
    [c] = explained.collisions
    assert c.version == 1 and c.operation == "DELETE"
    assert c.conflict == "ConcurrentDeleteDeleteException"
    assert c.file == f.path and c.rows == (3,)
    assert c.hint and "same rows" in c.hint


def test_other_rows_do_not_collide_and_say_which_rows_changed(tmp_path: Path) -> None:
    """Seed 000: different rows of the same file do not conflict."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {2, 3})
    _delete_rows(log, f, {8})
    explained = _explain(log, OperationName.UPDATE, "id = 5")
    assert [c.conflict for c in explained.collisions] == [None, None]
    notes = [c.note or "" for c in explained.collisions]
    assert "rows 2, 3" in notes[0] and "rebased" in notes[0]
    assert "rows 8" in notes[1]  # mapped against the vector after the first winner


def test_rows_deleted_before_the_read_are_not_matched(tmp_path: Path) -> None:
    log, f = _table(tmp_path)
    _delete_rows(log, f, {5})  # version 1
    _delete_rows(log, f, {6})  # version 2
    explained = _explain(log, OperationName.DELETE, "id >= 5", since=1)
    assert explained.matched_rows == {f.path: (6, 7, 8, 9)}
    [c] = explained.collisions
    assert c.version == 2 and c.rows == (6,)


def test_serializable_names_the_appended_row_that_matches(tmp_path: Path) -> None:
    """Seed 000: under Serializable a blind append conflicts with DML only when an appended
    row matches its condition; under WriteSerializable never."""
    for level, want in (("Serializable", "ConcurrentAppendException"), ("WriteSerializable", None)):
        (tmp_path / level).mkdir()
        log, _ = _table(tmp_path / level, level)
        root = Path(log.table_path)
        _append(log, _data_file(root, "part-1.parquet", [100, 5, 200]))
        _append(log, _data_file(root, "part-2.parquet", [300, 400]))
        explained = _explain(log, OperationName.DELETE, "id = 5")
        assert [c.conflict for c in explained.collisions] == [want, None]
        if want:
            assert explained.collisions[0].rows == (1,)
            assert explained.collisions[0].file == "part-1.parquet"


def test_optimize_and_dml_do_not_collide_either_way(tmp_path: Path) -> None:
    """Seed 000: OPTIMIZE vs UPDATE/DELETE/MERGE cannot conflict with deletion vectors
    (without ZORDER BY), in either order."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {1})
    explained = _explain(log, OperationName.OPTIMIZE, None)
    [c] = explained.collisions
    assert c.conflict is None and c.note and "carried onto" in c.note
    # a compaction with provenance wins; a DML that read before it follows the rows
    root = Path(log.table_path)
    current = log.snapshot().add_files()[0]
    out = _data_file(root, "part-9.parquet", [i for i in range(10) if i != 1])
    out = replace(
        out,
        data_change=False,
        tags={SOURCES_TAG: encode_sources([(f.path, 9, current.deletion_vector)])},
    )
    txn = OptimisticTransaction(log, log.snapshot())
    txn.remove_files([current], data_change=False)
    txn.add_files([out])
    txn.record_operation(Operation(OperationName.OPTIMIZE, {}), {})
    compacted_at = txn.commit()
    explained = _explain(log, OperationName.DELETE, "id = 4", since=1)
    [c] = explained.collisions
    assert c.version == compacted_at and c.conflict is None
    assert c.note and "followed onto part-9.parquet" in c.note
    # a file-level table: the same race is a conflict naming the file
    explained = _explain(log, OperationName.DELETE, "id = 4 AND rand() < 2", since=1)
    assert explained.fallback and "non-deterministic" in explained.fallback
    assert explained.collisions[0].conflict is not None


def test_explaining_writes_nothing(tmp_path: Path) -> None:
    """Explaining reads the table and writes nothing: the rebase it reports only plans its
    deletion vectors (the commit loop writes them, and explaining commits nothing)."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {2})
    root = Path(log.table_path)
    before = _files(root)
    explained = _explain(log, OperationName.DELETE, "id = 5")
    assert explained.collisions[0].note  # it rebased onto the winner's vector
    assert _files(root) == before


def test_unmodelled_operation_is_refused(tmp_path: Path) -> None:
    log, _ = _table(tmp_path)
    with pytest.raises(InvalidArgumentError, match="cannot explain a RESTORE"):
        explain_conflicts(log, log.snapshot(0), operation=OperationName.RESTORE)


def test_cli_names_the_rows(run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    log, f = _table(tmp_path)
    _delete_rows(log, f, {4})
    args = ["conflicts", log.table_path, "--since", "0", "--condition", "id >= 4"]
    code, out, _ = run_cli(*args, "--json")
    assert code == 3  # a collision was found
    [row] = json.loads(out)
    assert (row["conflict"], row["file"], row["rows"]) == (
        "ConcurrentDeleteDeleteException",
        f.path,
        [4],
    )
    code, out, _ = run_cli(*args)
    assert code == 3 and "comparing rows: 6 matched in 1 file(s)" in " ".join(out.split())
    assert "1 of 1 later commit(s) collide" in out


def test_cli_conflicts_loads_no_spark(tmp_path: Path) -> None:
    """The issue: `deltatx conflicts` works without Spark (log only)."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {4})
    script = (
        "import sys; from deltatx import cli; "
        f"sys.argv = ['deltatx', 'conflicts', {log.table_path!r}, '--since', '0', "
        "'--condition', 'id = 4', '--json'];\n"
        "try:\n    cli.main()\nexcept SystemExit as e:\n    assert e.code == 3, e.code\n"
        "assert not any(m.startswith('pyspark') for m in sys.modules), 'pyspark loaded'"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["rows"] == [4]


def test_cli_edge_versions_and_vacuumed_files(
    run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    """Reading the latest version: nothing to explain. A version past it: exit 2 naming it.
    A data file gone (vacuumed): a one-line error naming the file, nothing written."""
    log, f = _table(tmp_path)
    code, out, _ = run_cli("conflicts", log.table_path, "--since", "0", "--json")
    assert code == 0 and json.loads(out) == []
    code, _, err = run_cli("conflicts", log.table_path, "--since", "7")
    assert code == 2 and "7" in err and err.strip().count("\n") == 0
    _delete_rows(log, f, {1})
    (Path(log.table_path) / f.path).unlink()
    before = _files(Path(log.table_path))
    code, _, err = run_cli("conflicts", log.table_path, "--since", "0", "--condition", "id = 3")
    assert code == 3 and f.path in err and "does not exist" in err
    assert _files(Path(log.table_path)) == before


def test_only_the_condition_columns_are_read(tmp_path: Path) -> None:
    """The condition is evaluated on the column it names (v here, not id)."""
    log, f = _table(tmp_path)
    _delete_rows(log, f, {9})
    explained = _explain(log, OperationName.DELETE, "v >= 90")
    assert explained.matched_rows == {f.path: (9,)}
    assert explained.collisions[0].rows == (9,)
