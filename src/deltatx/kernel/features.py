"""Protocol versions and table features: what a table requires and what deltatx supports."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.kernel.column_mapping import FEATURE as COLUMN_MAPPING
from deltatx.kernel.column_mapping import is_mapped, mode_of

TABLE_FEATURES_READER_VERSION = 3
TABLE_FEATURES_WRITER_VERSION = 7

# Features whose semantics deltatx implements when reading a table.
SUPPORTED_READER_FEATURES: frozenset[str] = frozenset(
    {
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "v2Checkpoint",
        # Nothing for a reader to do: it binds VACUUM, which checks the protocol first.
        "vacuumProtocolCheck",
        # Spark's Parquet reader widens values written with the older, narrower type.
        "typeWidening",
        "typeWidening-preview",
        # Spark 4 reads and writes the variant type natively.
        "variantType",
        "variantType-preview",
    }
)
# Features deltatx honours when writing (appendOnly, invariants, checkConstraints and
# generatedColumns are enforced on every row and commit it writes).
SUPPORTED_WRITER_FEATURES: frozenset[str] = frozenset(
    {
        "appendOnly",
        "checkConstraints",
        "generatedColumns",
        "invariants",
        "deletionVectors",
        "domainMetadata",
        "timestampNtz",
        "changeDataFeed",
        # Checkpoints carry checkpointMetadata and are never multi-part (log/checkpoint.py).
        "v2Checkpoint",
        # commitInfo comes first and records a monotonic inCommitTimestamp (log/commit.py).
        "inCommitTimestamp",
        # VACUUM checks the reader and writer protocol before deleting anything (log/vacuum.py).
        "vacuumProtocolCheck",
        # deltatx never changes a column's type, so it never has a typeChanges entry to add;
        # the schema it writes back keeps the entries other writers recorded.
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "columnMapping",
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
    if feature == COLUMN_MAPPING:
        return is_mapped(mode_of(conf))
    if feature == "generatedColumns":
        return "delta.generationExpression" in metadata.schema_string
    if feature == "identityColumns":
        return "delta.identity." in metadata.schema_string
    return True


_NOT_NULL_FIELD = re.compile(r'"nullable"\s*:\s*false')


def schema_features(schema_string: str) -> list[str]:
    """The writer features a table's schema puts in use.

    A NOT NULL column or a ``delta.invariants`` field is an invariant: a table-features
    protocol must name ``invariants`` for it, or other engines refuse the table as one whose
    protocol and metadata disagree. Generated columns need ``generatedColumns``.
    """
    out: list[str] = []
    if _NOT_NULL_FIELD.search(schema_string) or "delta.invariants" in schema_string:
        out.append("invariants")
    if "delta.generationExpression" in schema_string:
        out.append("generatedColumns")
    return out


def protocol_with_features(base: ProtocolAction, features: Iterable[str]) -> ProtocolAction:
    """The smallest protocol at least as strong as ``base`` that names ``features``.

    ``deletionVectors`` and ``timestampNtz`` are reader-writer features; the rest are
    writer-only. Moving from legacy versions to (3, 7) keeps the features the legacy versions
    implied, so nothing a reader relied on is dropped.
    """
    wanted = set(features)
    if not wanted - writer_features(base):
        return base
    reader_writer = {
        "deletionVectors",
        "timestampNtz",
        "columnMapping",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "variantType",
    }
    # Only writer-only features may stay on a legacy protocol: a legacy writer version says
    # nothing to readers, so a feature readers must know moves the table to table features.
    legacy = None if wanted & reader_writer else _legacy_writer_version(base, wanted)
    if legacy is not None:
        return ProtocolAction(min_reader_version=base.min_reader_version, min_writer_version=legacy)
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


def _legacy_writer_version(base: ProtocolAction, wanted: set[str]) -> int | None:
    # A legacy table keeps a legacy protocol when a higher legacy writer version implies the
    # features: older readers and writers then still recognise it.
    if base.min_writer_version >= TABLE_FEATURES_WRITER_VERSION or base.min_reader_version > 1:
        return None
    for version in sorted(_LEGACY_WRITER_FEATURES):
        if version >= base.min_writer_version and wanted <= _LEGACY_WRITER_FEATURES[version]:
            return version
    return None


def protocol_for_configuration(
    configuration: dict[str, str] | Mapping[str, str], base: ProtocolAction
) -> ProtocolAction:
    """The protocol that table properties need.

    ``delta.enableDeletionVectors`` needs ``deletionVectors``, ``delta.appendOnly`` needs
    ``appendOnly``, ``delta.checkpointPolicy = v2`` needs ``v2Checkpoint``,
    ``delta.enableInCommitTimestamps`` needs ``inCommitTimestamp``,
    ``delta.enableChangeDataFeed`` needs ``changeDataFeed`` and a ``delta.constraints.*``
    property needs ``checkConstraints``. A legacy protocol is raised to the smallest legacy
    writer version that implies the features when there is one (CHECK constraints: writer
    version 3); otherwise the table moves to table features (3, 7) naming them.
    """
    features: list[str] = []
    if configuration.get("delta.enableDeletionVectors", "false").lower() == "true":
        features.append("deletionVectors")
    if configuration.get("delta.appendOnly", "false").lower() == "true":
        features.append("appendOnly")
    if configuration.get("delta.checkpointPolicy", "classic").strip().lower() == "v2":
        features.append("v2Checkpoint")
    if configuration.get("delta.enableInCommitTimestamps", "false").strip().lower() == "true":
        features.append("inCommitTimestamp")
    if configuration.get("delta.enableChangeDataFeed", "false").lower() == "true":
        features.append("changeDataFeed")
    if is_mapped(mode_of(configuration)):
        features.append(COLUMN_MAPPING)
    if any(k.lower().startswith("delta.constraints.") for k in configuration):
        features.append("checkConstraints")
    return protocol_with_features(base, features) if features else base
