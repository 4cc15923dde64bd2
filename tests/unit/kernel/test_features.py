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
            ProtocolAction(3, 7, reader_features=("columnMapping",), writer_features=()),
            "columnMapping",
        ),
    ],
)
def test_unreadable_protocols_are_refused(protocol: ProtocolAction, feature: str | None) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        check_readable(protocol)
    assert info.value.feature == feature


def test_an_unsupported_writer_feature_is_refused_by_name() -> None:
    p = ProtocolAction(1, 7, writer_features=("rowTracking",))
    check_readable(p)
    with pytest.raises(UnsupportedFeatureError, match="rowTracking"):
        check_writable(p)


def test_a_check_constraint_property_puts_its_feature_in_the_protocol() -> None:
    """PROTOCOL.md "CHECK Constraints": on writer version 7 the feature must be listed."""
    p = protocol_for_configuration({"delta.constraints.positive": "id > 0"}, DEFAULT_PROTOCOL)
    assert "checkConstraints" in (p.writer_features or ())
    assert p.min_writer_version == 7 and reader_features(p) == frozenset()
    assert protocol_for_configuration({"delta.appendOnly": "false"}, DEFAULT_PROTOCOL) == (
        DEFAULT_PROTOCOL
    )


def test_check_constraints_in_use_are_writable() -> None:
    p = ProtocolAction(1, 7, writer_features=("checkConstraints",))
    metadata = Metadata(
        id="t",
        schema_string='{"type":"struct","fields":[]}',
        partition_columns=(),
        configuration={"delta.constraints.positive": "id > 0"},
    )
    check_writable(p, metadata)
