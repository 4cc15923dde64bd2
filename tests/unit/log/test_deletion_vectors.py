"""Deletion vector files: where a descriptor's file is, and that reads stay in the table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import DeletionVectorDescriptor
from deltatx.kernel.deletion_vectors import dv_relative_path
from deltatx.log import DeltaLog
from deltatx.log.deletion_vectors import DvReader, dv_file_location, write_dvs
from deltatx.storage import LocalLogStore, MemoryLogStore

ROOT = "/mem/t"


def _log() -> DeltaLog:
    return DeltaLog.for_table(ROOT, store=MemoryLogStore())


def test_rows_written_are_rows_read_back() -> None:
    log = _log()
    first, second = write_dvs(log, [[0, 5, 9], [1 << 33]])
    reader = DvReader(log)
    assert reader.rows(first, data_file="a.parquet") == [0, 5, 9]
    assert reader.rows(second) == [1 << 33]
    assert first.storage_type == "u" and first.cardinality == 3


def test_a_p_vector_is_read_from_its_absolute_path_in_any_spelling() -> None:
    log = _log()
    [dv] = write_dvs(log, [[2, 3]])
    data = log.store.read(f"{ROOT}/{dv_relative_path(dv.path_or_inline_dv)}")
    log.store.write(f"{ROOT}/dv dir/x.bin", data)
    for spelling in (f"{ROOT}/dv dir/x.bin", f"file://{ROOT}/dv%20dir/x.bin"):
        p = replace(dv, storage_type="p", path_or_inline_dv=spelling)
        assert dv_file_location(log.location, p) == f"{ROOT}/dv dir/x.bin"
        assert DvReader(log).rows(p) == [2, 3]


@pytest.mark.parametrize("path", ["../outside/evil.bin", "evil.bin", "%2e%2e/evil.bin"])
def test_a_relative_p_vector_is_refused(path: str) -> None:
    log = _log()
    log.store.write("/mem/outside/evil.bin", b"\x01")
    dv = DeletionVectorDescriptor("p", path, size_in_bytes=10, cardinality=1, offset=1)
    with pytest.raises(InvalidTableError, match="relative"):
        DvReader(log).rows(dv, data_file="a.parquet")


def test_a_u_vector_whose_prefix_climbs_out_is_refused() -> None:
    log = _log()
    [dv] = write_dvs(log, [[1]])
    climbing = replace(dv, path_or_inline_dv="../../x" + dv.path_or_inline_dv[-20:])
    with pytest.raises(InvalidTableError, match="outside the table root"):
        DvReader(log).rows(climbing)


def test_a_p_vector_naming_a_directory_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "t" / "adir").mkdir(parents=True)
    log = DeltaLog.for_table(str(tmp_path / "t"), store=LocalLogStore(fsync=False))
    dv = DeletionVectorDescriptor(
        "p", str(tmp_path / "t" / "adir"), size_in_bytes=10, cardinality=1, offset=1
    )
    with pytest.raises(InvalidTableError, match="cannot be read"):
        DvReader(log).rows(dv, data_file="a.parquet")


def test_a_missing_vector_file_names_its_data_file() -> None:
    log = _log()
    [dv] = write_dvs(log, [[1]])
    log.store.delete(f"{ROOT}/{dv_relative_path(dv.path_or_inline_dv)}")
    with pytest.raises(InvalidTableError, match=r"of data file a\.parquet\) does not exist"):
        DvReader(log).rows(dv, data_file="a.parquet")
