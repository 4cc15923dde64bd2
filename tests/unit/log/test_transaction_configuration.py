"""The transaction answers "how is the table configured" from one TableConfiguration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import AppendOnlyViolationError
from deltatx.kernel.operations import Operation, OperationName
from deltatx.storage import LocalLogStore

from ..logtables import add, append, begin, create_table


def test_configuration_is_the_snapshots_until_something_is_staged(tmp_path: Path) -> None:
    log = create_table(LocalLogStore(fsync=False), str(tmp_path / "t"))
    snap = log.snapshot()
    assert snap.table_configuration is snap.table_configuration  # derived once
    txn = begin(log)
    assert txn.configuration is txn.snapshot.table_configuration  # type: ignore[union-attr]
    assert txn.schema is txn.configuration.schema
    staged = replace(txn.metadata, configuration={"delta.appendOnly": "true"})
    txn.update_metadata(staged)
    assert txn.configuration.append_only and txn.properties.append_only
    assert txn.configuration is txn.configuration  # cached while nothing else is staged


def test_log_api_remove_on_an_append_only_table_is_refused(tmp_path: Path) -> None:
    """Bug fixed: only DELETE and MERGE refused deletes; the log API bypassed delta.appendOnly."""
    log = create_table(
        LocalLogStore(fsync=False), str(tmp_path / "t"), configuration={"delta.appendOnly": "true"}
    )
    append(log, add("part=a/1.parquet", "a"))
    txn = begin(log)
    txn.remove_files(txn.scan())
    txn.record_operation(Operation(OperationName.DELETE, {"predicate": []}), {})
    with pytest.raises(AppendOnlyViolationError, match="append-only"):
        txn.commit()
    assert log.latest_version() == 1
