"""Table properties: validation of what is set, lenient reading of what a log holds."""

from __future__ import annotations

import pytest

from deltatx.errors import InvalidPropertyError, UnsupportedPropertyError
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.properties import (
    KNOWN_PROPERTIES,
    SPECS,
    TableProperties,
    known_property,
    parse_interval_ms,
    supported_properties,
    validate_properties,
)

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


# --- every delta.* key is known -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.autoOptimize.optimizeWrite", "true"),
        ("delta.autoOptimize.autoCompact", "auto"),
        ("delta.dataSkippingNumIndexedCols", "5"),
        ("delta.feature.identityColumns", "supported"),
        ("delta.minWriterVersion", "7"),
        ("delta.enableRowTracking", "true"),
    ],
)
def test_an_unimplemented_delta_property_is_refused_listing_the_supported_ones(
    key: str, value: str
) -> None:
    with pytest.raises(UnsupportedPropertyError) as info:
        validate_properties({key: value})
    assert info.value.key == key
    assert "not implemented" in str(info.value)
    assert "delta.appendOnly" in info.value.supported
    assert "delta.appendOnly" in str(info.value)


def test_a_misspelled_delta_key_is_refused_with_a_suggestion() -> None:
    with pytest.raises(UnsupportedPropertyError) as info:
        validate_properties({"delta.appendOnlyy": "true"})
    assert "not a Delta table property" in str(info.value)
    assert "did you mean 'delta.appendOnly'" in str(info.value)


def test_switching_an_unimplemented_behaviour_off_is_accepted() -> None:
    props = {"delta.autoOptimize.optimizeWrite": "false", "delta.enableRowTracking": "FALSE"}
    assert validate_properties(props) == props


def test_user_properties_and_constraints_pass() -> None:
    out = validate_properties({"owner": "me", "x.y": 1, "DELTA.Constraints.Pos": "v > 0"})
    assert out == {"owner": "me", "x.y": "1", "delta.constraints.Pos": "v > 0"}
    with pytest.raises(InvalidPropertyError):
        validate_properties({"delta.constraints.empty": " "})
    with pytest.raises(InvalidPropertyError):
        validate_properties({"deltatx.unknown": "1"})


def test_every_registry_row_is_reachable_and_every_spec_supported() -> None:
    for entry in KNOWN_PROPERTIES:
        probe = entry.key + "x" if entry.prefix else entry.key.upper()
        assert known_property(probe) == entry
    for key in SPECS:
        if key.startswith("delta."):
            assert key in supported_properties()
    assert known_property("delta.constraints.") is None


def test_the_message_names_the_property_as_documented_whatever_its_case() -> None:
    with pytest.raises(UnsupportedPropertyError, match=r"'delta\.autoOptimize\.optimizeWrite'"):
        validate_properties({"delta.autooptimize.optimizewrite": "true"})
