"""Command metrics as commitInfo.operationMetrics: camelCase names, integer values."""

from __future__ import annotations

import dataclasses

import pytest

from deltatx.kernel import metrics
from deltatx.kernel.metrics import CommandMetrics, RestoreMetrics, VacuumMetrics, WriteMetrics


def test_names_are_camel_case_and_values_integers() -> None:
    m = RestoreMetrics(num_added_files=2, table_size_after_restore=10, execution_time_ms=3)
    out = m.to_operation_metrics()
    assert out["numAddedFiles"] == 2
    assert out["tableSizeAfterRestore"] == 10
    assert out["numOfFilesAfterRestore"] == 0
    assert all(type(v) is int for v in out.values())


def test_vacuum_leaves_paths_and_dry_run_out_of_the_log() -> None:
    m = VacuumMetrics(num_deleted_files=1, deleted_paths=("/t/a",), dry_run=True)
    assert m.to_operation_metrics() == {
        "numDeletedFiles": 1,
        "numDeletedBytes": 0,
        "numFilesToDelete": 0,
        "executionTimeMs": 0,
    }


@pytest.mark.parametrize(
    "cls",
    [
        c
        for c in vars(metrics).values()
        if isinstance(c, type) and issubclass(c, CommandMetrics) and c is not VacuumMetrics
    ],
)
def test_every_field_of_every_command_is_reported(cls: type[CommandMetrics]) -> None:
    reported = cls().to_operation_metrics()
    # How the statement ran (attempts, versions read) goes to commitInfo's parameters instead.
    how_it_ran = {"attempts", "read_versions"}
    assert len(reported) == len([f for f in dataclasses.fields(cls) if f.name not in how_it_ran])
    assert "numAddedFiles" in reported and "executionTimeMs" in reported


def test_metrics_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        WriteMetrics().num_output_rows = 1  # type: ignore[misc]
