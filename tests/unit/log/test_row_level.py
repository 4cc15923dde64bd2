"""Row-level settlement reads data files and vectors: rows decide, not files (seed 000)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import ConcurrentDeleteDeleteException, InvalidTableError
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.row_level import matching_rows
from deltatx.log.transaction import OptimisticTransaction

from ..dvtables import deleted_rows, dv_table, id_eq, id_in, stage_delete


def test_matching_rows_skips_deleted_rows_and_stops_at_the_limit(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path)
    snap = log.snapshot()
    reader = DvReader(log)
    assert matching_rows(log, reader, f, id_in(2, 3, 7), snap.schema) == [2, 3, 7]
    assert matching_rows(log, reader, f, id_in(2, 3, 7), snap.schema, limit=1) == [2]
    txn = OptimisticTransaction(log, snap)
    stage_delete(txn, f.path, {3})
    txn.commit()
    [now] = log.snapshot().add_files()
    assert matching_rows(log, DvReader(log), now, id_in(2, 3, 7), snap.schema) == [2, 7]


def test_matching_rows_refuses_files_outside_the_root_and_names_missing_ones(
    tmp_path: Path,
) -> None:
    log, f = dv_table(tmp_path)
    schema = log.snapshot().schema
    with pytest.raises(InvalidTableError, match="outside the table root"):
        matching_rows(log, DvReader(log), replace(f, path="../secret.parquet"), id_eq(1), schema)
    with pytest.raises(InvalidTableError, match="does not exist"):
        matching_rows(log, DvReader(log), replace(f, path="gone.parquet"), id_eq(1), schema)


def test_deletes_of_different_rows_of_one_file_both_land(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path)
    read = log.snapshot()
    loser = OptimisticTransaction(log, read)
    stage_delete(loser, f.path, {5})
    winner = OptimisticTransaction(log, read)
    stage_delete(winner, f.path, {2})
    winner.commit()
    loser.commit()
    assert deleted_rows(log) == {f.path: frozenset({2, 5})}


def test_deletes_of_the_same_row_conflict(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path)
    read = log.snapshot()
    loser = OptimisticTransaction(log, read)
    stage_delete(loser, f.path, {2, 5})
    winner = OptimisticTransaction(log, read)
    stage_delete(winner, f.path, {2})
    winner.commit()
    with pytest.raises(ConcurrentDeleteDeleteException):
        loser.commit()
    assert deleted_rows(log) == {f.path: frozenset({2})}
