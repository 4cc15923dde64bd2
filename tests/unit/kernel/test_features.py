"""Protocol versions and table features: what deltatx can read and write."""

from __future__ import annotations

import pytest

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.kernel.features import (
    DEFAULT_PROTOCOL,
    check_readable,
    check_writable,
    protocol_for_configuration,
    protocol_with_features,
    reader_features,
    schema_features,
    writer_features,
)


def test_legacy_versions_imply_their_features() -> None:
    assert reader_features(DEFAULT_PROTOCOL) == frozenset()
    assert "appendOnly" in writer_features(DEFAULT_PROTOCOL)
    assert "columnMapping" in reader_features(ProtocolAction(2, 5))


def test_table_features_protocols_list_them_explicitly() -> None:
    p = ProtocolAction(
        3, 7, reader_features=("deletionVectors",), writer_features=("deletionVectors",)
    )
    assert reader_features(p) == {"deletionVectors"}
    check_writable(p)


@pytest.mark.parametrize(
    ("protocol", "feature"),
    [
        (ProtocolAction(4, 7), None),
        (
            ProtocolAction(3, 7, reader_features=("aFutureFeature",), writer_features=()),
            "aFutureFeature",
        ),
    ],
)
def test_unreadable_protocols_are_refused(protocol: ProtocolAction, feature: str | None) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        check_readable(protocol)
    assert info.value.feature == feature


def test_column_mapping_is_read_and_written_in_both_protocol_forms() -> None:
    check_writable(ProtocolAction(2, 5))
    named = ProtocolAction(3, 7, ("columnMapping",), ("columnMapping",))
    check_writable(named)


def test_the_mapping_mode_raises_the_protocol_to_name_the_feature() -> None:
    upgraded = protocol_for_configuration({"delta.columnMapping.mode": "name"}, DEFAULT_PROTOCOL)
    assert "columnMapping" in reader_features(upgraded)
    assert "columnMapping" in writer_features(upgraded)
    # A protocol already implying the feature is left alone.
    legacy = ProtocolAction(2, 5)
    assert protocol_for_configuration({"delta.columnMapping.mode": "id"}, legacy) == legacy
    assert protocol_for_configuration({}, DEFAULT_PROTOCOL) == DEFAULT_PROTOCOL


def test_an_unsupported_writer_feature_is_refused_by_name() -> None:
    p = ProtocolAction(1, 7, writer_features=("rowTracking",))
    check_readable(p)
    with pytest.raises(UnsupportedFeatureError, match="rowTracking"):
        check_writable(p)


@pytest.mark.parametrize(
    "feature",
    [
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
    ],
)
def test_reader_writer_features_other_engines_write_are_read_and_written(feature: str) -> None:
    p = ProtocolAction(3, 7, reader_features=(feature,), writer_features=(feature,))
    check_readable(p)
    check_writable(p)


@pytest.mark.parametrize("feature", ["inCommitTimestamp", "domainMetadata"])
def test_writer_features_deltatx_honours_are_writable(feature: str) -> None:
    check_writable(ProtocolAction(3, 7, reader_features=(), writer_features=(feature,)))


@pytest.mark.parametrize("feature", ["rowTracking", "clustering"])
def test_writes_to_tables_with_features_deltatx_does_not_maintain_are_refused(
    feature: str,
) -> None:
    p = ProtocolAction(3, 7, reader_features=(), writer_features=("domainMetadata", feature))
    check_readable(p)
    with pytest.raises(UnsupportedFeatureError, match=feature) as caught:
        check_writable(p)
    assert caught.value.feature == feature


@pytest.mark.parametrize(
    ("configuration", "feature", "reader"),
    [
        ({"delta.checkpointPolicy": "v2"}, "v2Checkpoint", True),
        ({"delta.checkpointPolicy": "V2"}, "v2Checkpoint", True),
        ({"delta.enableInCommitTimestamps": "true"}, "inCommitTimestamp", False),
    ],
)
def test_properties_bring_the_features_they_need(
    configuration: dict[str, str], feature: str, reader: bool
) -> None:
    p = protocol_for_configuration(configuration, DEFAULT_PROTOCOL)
    assert feature in writer_features(p)
    assert (feature in reader_features(p)) is reader
    assert "appendOnly" in writer_features(p)  # what the legacy version implied is kept


def test_classic_checkpoint_policy_needs_no_feature() -> None:
    assert protocol_for_configuration({"delta.checkpointPolicy": "classic"}, DEFAULT_PROTOCOL) == (
        DEFAULT_PROTOCOL
    )


def test_turning_on_the_change_data_feed_names_its_writer_feature() -> None:
    on = {"delta.enableChangeDataFeed": "true"}
    legacy = protocol_for_configuration(on, ProtocolAction(1, 2))
    assert "changeDataFeed" in writer_features(legacy)
    assert legacy.min_reader_version == 1
    with_dvs = ProtocolAction(3, 7, reader_features=("deletionVectors",), writer_features=())
    upgraded = protocol_for_configuration(on, with_dvs)
    assert "changeDataFeed" in (upgraded.writer_features or ())
    # Writer version 4 already implies the feature: nothing to change.
    assert protocol_for_configuration(on, ProtocolAction(1, 4)) == ProtocolAction(1, 4)
    assert protocol_for_configuration({"delta.enableChangeDataFeed": "false"}, legacy) == legacy


def test_check_constraints_raise_a_legacy_table_to_writer_version_3() -> None:
    conf = {"delta.constraints.pos": "v > 0"}
    legacy = protocol_for_configuration(conf, ProtocolAction(1, 2))
    assert (legacy.min_reader_version, legacy.min_writer_version) == (1, 3)
    assert legacy.writer_features is None
    features = ProtocolAction(3, 7, ("deletionVectors",), ("deletionVectors",))
    upgraded = protocol_for_configuration(conf, features)
    assert upgraded.writer_features == ("checkConstraints", "deletionVectors")
    assert protocol_for_configuration(conf, ProtocolAction(1, 4)) == ProtocolAction(1, 4)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}',
            [],
        ),
        (
            '{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}}]}',
            ["invariants"],
        ),
        (
            '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,'
            '"metadata":{"delta.generationExpression":"b * 2"}}]}',
            ["generatedColumns"],
        ),
    ],
)
def test_a_schema_names_the_writer_features_it_puts_in_use(
    schema: str, expected: list[str]
) -> None:
    assert schema_features(schema) == expected


def test_a_not_null_column_on_a_table_features_protocol_names_invariants() -> None:
    # Other engines refuse a (3, 7) table whose schema has a NOT NULL column but whose
    # protocol does not list invariants.
    dv = ProtocolAction(
        3, 7, reader_features=("deletionVectors",), writer_features=("deletionVectors",)
    )
    schema = (
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}}]}'
    )
    assert "invariants" in writer_features(protocol_with_features(dv, schema_features(schema)))


def test_check_constraints_in_use_are_writable() -> None:
    p = ProtocolAction(1, 7, writer_features=("checkConstraints",))
    metadata = Metadata(
        id="t",
        schema_string='{"type":"struct","fields":[]}',
        partition_columns=(),
        configuration={"delta.constraints.positive": "id > 0"},
    )
    check_writable(p, metadata)
