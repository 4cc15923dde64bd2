"""Protocol versions and table features: what deltatx can read and write."""

from __future__ import annotations

import pytest

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import ProtocolAction
from deltatx.kernel.features import (
    DEFAULT_PROTOCOL,
    check_readable,
    check_writable,
    protocol_for_configuration,
    reader_features,
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
