"""TableConfiguration: every fact about how a table is configured, derived in one place."""

from __future__ import annotations

import json

import pytest

from deltatx.errors import InvalidArgumentError, InvalidTableError, UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.table_configuration import (
    CheckConstraint,
    ColumnMappingMode,
    Invariant,
    TableConfiguration,
    with_check_constraint,
    without_check_constraint,
)

LEGACY = ProtocolAction(1, 2)
DV = ProtocolAction(3, 7, ("deletionVectors",), ("deletionVectors",))


def schema(*fields: tuple[str, str, dict[str, object]]) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": m} for n, t, m in fields
            ],
        }
    )


PLAIN = schema(("id", "long", {}), ("p", "string", {}))


def config(
    protocol: ProtocolAction = LEGACY,
    conf: dict[str, str] | None = None,
    schema_string: str = PLAIN,
) -> TableConfiguration:
    md = Metadata("t", schema_string, ("p",), dict(conf or {}))
    return TableConfiguration.of(protocol, md)


def test_schema_partitioning_and_properties_are_parsed_once() -> None:
    c = config(conf={"delta.isolationLevel": "Serializable", "delta.appendOnly": "true"})
    assert c.schema.field_names() == ["id", "p"]
    assert c.partition_columns == ("p",)
    assert c.isolation_level is IsolationLevel.SERIALIZABLE
    assert c.append_only is True
    assert c.properties.append_only is True


@pytest.mark.parametrize(
    ("protocol", "enabled", "expected"),
    [
        (DV, "true", True),
        (DV, "false", False),  # feature named, property off
        (LEGACY, "true", False),  # property on, protocol does not name the feature
    ],
)
def test_deletion_vector_writes_need_property_and_feature(
    protocol: ProtocolAction, enabled: str, expected: bool
) -> None:
    c = config(protocol, {"delta.enableDeletionVectors": enabled})
    assert c.deletion_vectors_enabled is expected


def test_features_in_force_include_legacy_implied_ones() -> None:
    assert config(LEGACY).writer_features == {"appendOnly", "invariants"}
    assert config(DV).reader_features == {"deletionVectors"}
    assert config(DV).writer_features == {"deletionVectors"}


def test_column_mapping_and_change_data_feed() -> None:
    assert config().column_mapping_mode is ColumnMappingMode.NONE
    c = config(conf={"delta.columnMapping.mode": "Name", "delta.enableChangeDataFeed": "true"})
    assert c.column_mapping_mode is ColumnMappingMode.NAME
    assert c.change_data_feed is True


def test_invariants_are_found_in_nested_field_metadata() -> None:
    inv = json.dumps({"expression": {"expression": "x > 0"}})
    nested = {
        "type": "struct",
        "fields": [
            {"name": "x", "type": "long", "nullable": True, "metadata": {"delta.invariants": inv}}
        ],
    }
    c = config(schema_string=schema(("id", "long", {}), ("p", "string", {}), ("s", nested, {})))  # type: ignore[arg-type]
    assert c.invariants == (Invariant("s.x", "x > 0"),)
    assert c.has_constraints


def test_check_constraints_come_from_properties() -> None:
    c = config(conf={"delta.constraints.positive": "id > 0"})
    assert c.check_constraints == (CheckConstraint("positive", "id > 0"),)
    assert c.constraint_checks == (("CHECK constraint 'positive'", "id > 0"),)
    with pytest.raises(UnsupportedFeatureError, match=r"positive.*'x\.parquet'") as info:
        c.check_constraints_enforceable("x.parquet")
    assert info.value.feature == "checkConstraints"
    config().check_constraints_enforceable("x.parquet")  # no constraint: nothing to refuse


def test_unknown_writer_feature_makes_the_table_unwritable() -> None:
    c = config(ProtocolAction(3, 7, (), ("futureWriter",)))
    # Decided once per configuration; each check raises a fresh error naming the feature.
    errors = []
    for _ in range(2):
        with pytest.raises(UnsupportedFeatureError, match="futureWriter") as info:
            c.check_writable()
        errors.append(info.value)
    assert [e.feature for e in errors] == ["futureWriter", "futureWriter"]
    assert errors[0] is not errors[1]
    config(DV).check_writable()


def test_partition_columns_are_spelled_as_partition_values_keys() -> None:
    mapped = schema(
        ("id", "long", {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "c1"}),
        ("p", "string", {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "c2"}),
    )
    on = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    assert config(ProtocolAction(2, 5), on, mapped).physical_partition_columns == ("c2",)
    assert config().physical_partition_columns == ("p",)


def test_unparsable_schema_is_refused() -> None:
    with pytest.raises(InvalidTableError):
        config(schema_string="{not json")


ICT = ProtocolAction(3, 7, (), ("inCommitTimestamp",))
ICT_ON = {"delta.enableInCommitTimestamps": "true"}


@pytest.mark.parametrize(
    ("protocol", "conf", "expected"),
    [
        (ICT, ICT_ON, True),
        (ICT, {}, False),  # the feature alone records nothing
        (LEGACY, ICT_ON, False),  # the property without the feature is not in force
        (ICT, {"delta.enableInCommitTimestamps": "FALSE"}, False),
    ],
)
def test_in_commit_timestamps_need_the_feature_and_the_property(
    protocol: ProtocolAction, conf: dict[str, str], expected: bool
) -> None:
    assert config(protocol, conf).in_commit_timestamps is expected


def test_only_the_commit_that_turns_them_on_enables_them() -> None:
    off, on = config(ICT), config(ICT, ICT_ON)
    assert on.in_commit_timestamps_enabled_by(off)
    assert not on.in_commit_timestamps_enabled_by(on)
    assert not on.in_commit_timestamps_enabled_by(None)  # a new table needs no enablement
    assert not off.in_commit_timestamps_enabled_by(on)


def test_v2_checkpoints_follow_the_feature() -> None:
    v2 = ProtocolAction(3, 7, ("v2Checkpoint",), ("v2Checkpoint",))
    assert config(v2).v2_checkpoints
    assert not config(LEGACY, {"delta.checkpointPolicy": "v2"}).v2_checkpoints


def test_constraints_are_added_and_dropped_by_lower_cased_name() -> None:
    conf = with_check_constraint({"k": "v"}, "Pos", "v > 0")
    assert conf == {"k": "v", "delta.constraints.pos": "v > 0"}
    with pytest.raises(InvalidArgumentError, match="already has a constraint named 'POS'"):
        with_check_constraint(conf, "POS", "v > 1")
    with pytest.raises(InvalidArgumentError, match="identifier"):
        with_check_constraint(conf, "1bad", "v > 1")
    with pytest.raises(InvalidArgumentError, match="boolean expression"):
        with_check_constraint(conf, "other", "  ")
    assert without_check_constraint(conf, "POS", if_exists=False) == {"k": "v"}
    assert without_check_constraint(conf, "missing", if_exists=True) is None
    with pytest.raises(InvalidArgumentError, match=r"constraints: pos"):
        without_check_constraint(conf, "missing", if_exists=False)
