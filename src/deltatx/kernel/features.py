"""Protocol versions and table features: what a table requires and what deltatx supports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction

TABLE_FEATURES_READER_VERSION = 3
TABLE_FEATURES_WRITER_VERSION = 7

# Features whose semantics deltatx implements when reading a table.
SUPPORTED_READER_FEATURES: frozenset[str] = frozenset({"deletionVectors", "timestampNtz"})
# Features deltatx honours when writing; writer-only features that only constrain writers of
# data we never produce (e.g. appendOnly is enforced, invariants we refuse) are listed explicitly.
SUPPORTED_WRITER_FEATURES: frozenset[str] = frozenset(
    {
        "appendOnly",
        "deletionVectors",
        "domainMetadata",
        "timestampNtz",
        "changeDataFeed",
        # Enforced: the Spark commands check every row they write, and a commit refuses any
        # added file whose rows were not checked (kernel.commit_rules).
        "checkConstraints",
    }
)

# Legacy protocol versions map to implicit feature sets (PROTOCOL.md "Table Features").
_LEGACY_WRITER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"appendOnly", "invariants"}),
    3: frozenset({"appendOnly", "invariants", "checkConstraints"}),
    4: frozenset(
        {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
    ),
    5: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
        }
    ),
    6: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "identityColumns",
        }
    ),
}
_LEGACY_READER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"columnMapping"}),
}

_BINDING_ONLY_IN_USE: frozenset[str] = frozenset(
    {"invariants", "checkConstraints", "generatedColumns", "identityColumns", "columnMapping"}
)

DEFAULT_PROTOCOL = ProtocolAction(min_reader_version=1, min_writer_version=2)


def reader_features(protocol: ProtocolAction) -> frozenset[str]:
    """Every reader feature a protocol requires, explicit or implied by legacy versions."""
    if protocol.min_reader_version >= TABLE_FEATURES_READER_VERSION:
        return frozenset(protocol.reader_features or ())
    return _LEGACY_READER_FEATURES.get(protocol.min_reader_version, frozenset())


def writer_features(protocol: ProtocolAction) -> frozenset[str]:
    """Every writer feature a protocol requires, explicit or implied by legacy versions."""
    if protocol.min_writer_version >= TABLE_FEATURES_WRITER_VERSION:
        return frozenset(protocol.writer_features or ())
    return _LEGACY_WRITER_FEATURES.get(protocol.min_writer_version, frozenset())


def check_readable(protocol: ProtocolAction) -> None:
    """Raises when deltatx cannot read a table with this protocol.

    Raises:
        UnsupportedFeatureError: The reader version or a reader feature is not supported.
    """
    if protocol.min_reader_version > TABLE_FEATURES_READER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires reader version {protocol.min_reader_version}; deltatx reads "
            f"versions up to {TABLE_FEATURES_READER_VERSION}."
        )
    for feature in sorted(reader_features(protocol)):
        if feature not in SUPPORTED_READER_FEATURES:
            raise UnsupportedFeatureError(
                f"The table requires the reader feature '{feature}', which deltatx does not "
                f"support; it cannot be read.",
                feature=feature,
            )


def check_writable(protocol: ProtocolAction, metadata: Metadata | None = None) -> None:
    """Raises when deltatx cannot write a table with this protocol.

    Features such as ``invariants`` and ``checkConstraints`` (implied by writer versions 2 and 3)
    only bind a writer when the schema or properties actually declare one, so they are checked
    against the metadata rather than refused outright.

    Raises:
        UnsupportedFeatureError: The writer version or a writer feature is not supported.
    """
    check_readable(protocol)
    if protocol.min_writer_version > TABLE_FEATURES_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires writer version {protocol.min_writer_version}; deltatx writes "
            f"versions up to {TABLE_FEATURES_WRITER_VERSION}."
        )
    for feature in sorted(writer_features(protocol)):
        if feature in SUPPORTED_WRITER_FEATURES:
            continue
        if feature in _BINDING_ONLY_IN_USE and not _feature_in_use(feature, metadata):
            continue
        raise UnsupportedFeatureError(
            f"The table requires the writer feature '{feature}', which deltatx does not "
            f"support; it cannot be written.",
            feature=feature,
        )


def _feature_in_use(feature: str, metadata: Metadata | None) -> bool:
    if metadata is None:
        return False
    conf = metadata.configuration
    if feature == "checkConstraints":
        return any(k.startswith("delta.constraints.") for k in conf)
    if feature == "invariants":
        return "delta.invariants" in metadata.schema_string
    if feature == "columnMapping":
        return conf.get("delta.columnMapping.mode", "none") != "none"
    if feature == "generatedColumns":
        return "delta.generationExpression" in metadata.schema_string
    if feature == "identityColumns":
        return "delta.identity." in metadata.schema_string
    return True


def protocol_with_features(base: ProtocolAction, features: Iterable[str]) -> ProtocolAction:
    """The smallest protocol at least as strong as ``base`` that names ``features``.

    ``deletionVectors`` and ``timestampNtz`` are reader-writer features; the rest are
    writer-only. Moving from legacy versions to (3, 7) keeps the features the legacy versions
    implied, so nothing a reader relied on is dropped.
    """
    wanted = set(features)
    if not wanted - writer_features(base):
        return base
    reader_writer = {"deletionVectors", "timestampNtz", "columnMapping", "v2Checkpoint"}
    writers = set(writer_features(base)) | wanted
    readers = set(reader_features(base)) | (wanted & reader_writer)
    if readers:
        return ProtocolAction(
            min_reader_version=TABLE_FEATURES_READER_VERSION,
            min_writer_version=TABLE_FEATURES_WRITER_VERSION,
            reader_features=tuple(sorted(readers)),
            writer_features=tuple(sorted(writers | readers)),
        )
    return ProtocolAction(
        min_reader_version=max(base.min_reader_version, 1),
        min_writer_version=TABLE_FEATURES_WRITER_VERSION,
        reader_features=None,
        writer_features=tuple(sorted(writers)),
    )


def protocol_for_configuration(
    configuration: dict[str, str] | Mapping[str, str], base: ProtocolAction
) -> ProtocolAction:
    """The protocol that table properties need.

    ``deletionVectors`` when DVs are on (reader version 3), ``appendOnly`` and
    ``checkConstraints`` (writer version 7) when the properties use them.
    """
    features: list[str] = []
    if configuration.get("delta.enableDeletionVectors", "false").lower() == "true":
        features.append("deletionVectors")
    if configuration.get("delta.appendOnly", "false").lower() == "true":
        features.append("appendOnly")
    if any(key.startswith("delta.constraints.") for key in configuration):
        # A reader must find the feature in the protocol, or it refuses the table.
        features.append("checkConstraints")
    return protocol_with_features(base, features) if features else base
