"""The protocol's actions: identity of files with deletion vectors, removes of adds."""

from __future__ import annotations

import dataclasses

import pytest

from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor, RemoveFile

DV = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", size_in_bytes=34, cardinality=2)


def test_a_vectors_id_is_type_path_and_offset() -> None:
    assert DV.unique_id == "uab^-aqEH.-t@S}K{vb[*k^"
    assert dataclasses.replace(DV, offset=4).unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"


def test_a_file_without_a_vector_has_no_vector_id() -> None:
    assert AddFile("a", {}, 1, 1, True).dv_id is None
    assert RemoveFile("a").dv_id is None


def test_remove_takes_out_exactly_the_file_and_its_vector() -> None:
    add = AddFile(
        "p=1/a.parquet",
        {"p": "1"},
        size=10,
        modification_time=5,
        data_change=True,
        stats='{"numRecords":3}',
        deletion_vector=DV,
        base_row_id=7,
    )
    removed = add.remove(timestamp=99, data_change=False)
    assert (removed.path, removed.dv_id, removed.size) == (add.path, add.dv_id, 10)
    assert removed.deletion_timestamp == 99 and removed.data_change is False
    assert removed.extended_file_metadata is True
    assert (removed.partition_values, removed.base_row_id) == ({"p": "1"}, 7)


def test_actions_are_frozen_and_ignore_extra_fields_in_equality() -> None:
    add = AddFile("a", {}, 1, 1, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        add.path = "b"  # type: ignore[misc]
    assert dataclasses.replace(add, extra={"future": 1}) == add
