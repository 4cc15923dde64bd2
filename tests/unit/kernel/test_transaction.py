"""The read set a transaction records and the blind-append rule."""

from __future__ import annotations

from deltatx.kernel.actions import AddCDCFile, AddFile, RemoveFile
from deltatx.kernel.expressions import TRUE, Column, Comparison, ComparisonOp, Literal
from deltatx.kernel.transaction import ReadTracker, is_blind_append

PRED = Comparison(ComparisonOp.EQ, Column("part"), Literal("a"))


def _add(path: str) -> AddFile:
    return AddFile(path, {}, 1, 1, True)


def test_scans_record_each_predicate_once_and_the_first_version_of_each_file() -> None:
    tracker = ReadTracker()
    first = _add("a")
    tracker.record_scan(PRED, [first])
    tracker.record_scan(PRED, [AddFile("a", {}, 99, 1, True), _add("b")])
    reads = tracker.freeze()
    assert reads.predicates == (PRED,)
    assert reads.read_paths == {"a", "b"}
    assert reads.read_files["a"] is first
    assert reads.depends_on_files


def test_whole_table_reads_add_the_true_predicate() -> None:
    tracker = ReadTracker()
    tracker.record_whole_table()
    reads = tracker.freeze()
    assert reads.read_whole_table and reads.predicates == (TRUE,)


def test_row_level_reads_and_the_first_fallback_reason() -> None:
    tracker = ReadTracker()
    tracker.record_row_level([_add("a"), _add("b")], {"a": [3, 1]})
    tracker.record_row_level_fallback("non-deterministic")
    tracker.record_row_level_fallback("later reason")
    reads = tracker.freeze()
    assert reads.row_level_rows == {"a": frozenset({1, 3}), "b": frozenset()}
    assert reads.row_level_fallback == "non-deterministic"


def test_a_frozen_read_set_does_not_change_with_later_reads() -> None:
    tracker = ReadTracker()
    frozen = tracker.freeze()
    tracker.record_scan(PRED, [_add("a")])
    assert not frozen.depends_on_files


def test_blind_append_needs_only_adds_and_no_file_reads() -> None:
    nothing = ReadTracker().freeze()
    assert is_blind_append([_add("a")], nothing)
    assert is_blind_append([], nothing)
    assert not is_blind_append([RemoveFile("a", 1, True)], nothing)
    assert not is_blind_append([AddCDCFile("c", {}, 1, True)], nothing)
    metadata_only = ReadTracker()
    metadata_only.record_metadata_read()
    metadata_only.record_app_id("app")
    assert is_blind_append([_add("a")], metadata_only.freeze())
    scanned = ReadTracker()
    scanned.record_scan(PRED, [])
    assert not is_blind_append([_add("a")], scanned.freeze())
