"""Table properties: validation of what is set, lenient reading of what a log holds."""

from __future__ import annotations

import pytest

from deltatx.errors import InvalidPropertyError
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.properties import TableProperties, parse_interval_ms, validate_properties

DAY_MS = 24 * 3_600_000


def test_intervals() -> None:
    assert parse_interval_ms("interval 7 days") == 7 * DAY_MS
    assert parse_interval_ms("interval 2 hours") == 2 * 3_600_000
    with pytest.raises(ValueError, match="not an interval"):
        parse_interval_ms("a week")


def test_set_values_are_normalised_and_keys_matched_case_insensitively() -> None:
    out = validate_properties(
        {
            "DELTA.isolationLevel": "serializable",
            "delta.appendOnly": True,
            "delta.columnMapping.mode": "Name",
            "user.k": 3,
        }
    )
    assert out == {
        "delta.isolationLevel": "Serializable",
        "delta.appendOnly": "true",
        "delta.columnMapping.mode": "name",
        "user.k": "3",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.isolationLevel", "SnapshotIsolation"),
        ("delta.appendOnly", "maybe"),
        ("delta.deletedFileRetentionDuration", "7 days"),
        ("delta.checkpointInterval", "0"),
        ("delta.columnMapping.mode", "position"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidPropertyError) as info:
        validate_properties({key: value})
    assert info.value.key == key


def test_a_log_is_read_leniently_with_defaults() -> None:
    props = TableProperties.from_configuration(
        {"delta.appendOnly": "nonsense", "delta.deletedFileRetentionDuration": "interval 1 days"}
    )
    assert props.append_only is False
    assert props.deleted_file_retention_ms == DAY_MS
    assert props.isolation_level is IsolationLevel.WRITE_SERIALIZABLE
    assert TableProperties.from_configuration({}).deleted_file_retention_ms == 7 * DAY_MS
