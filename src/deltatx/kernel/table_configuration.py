"""How one version of a table is configured: every derived fact, computed once.

Protocol, metadata, schema and properties together answer questions such as "may DML write
deletion vectors?" or "is the table append-only?". Answering them in several places led to
several answers; a :class:`TableConfiguration` is built once per snapshot (and once per staged
metadata or protocol change) and every layer asks it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.kernel.column_mapping import (
    MODE_KEY,
    ColumnMappingMode,
    is_mapped,
    mode_of,
    physical_columns,
    physical_schema,
)
from deltatx.kernel.features import check_writable, reader_features, writer_features
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.properties import TableProperties
from deltatx.kernel.schema import ArrayType, DataType, MapType, StructType, parse_schema

CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"
COLUMN_MAPPING_MODE = MODE_KEY
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


@dataclass(frozen=True, slots=True)
class Invariant:
    """A column invariant (``delta.invariants`` in a field's metadata).

    Attributes:
        column: The dotted path of the column.
        expression: The SQL boolean every row must satisfy.
    """

    column: str
    expression: str


@dataclass(frozen=True, slots=True)
class CheckConstraint:
    """A CHECK constraint (a ``delta.constraints.<name>`` table property)."""

    name: str
    expression: str


@dataclass(frozen=True, slots=True, eq=False)
class TableConfiguration:
    """The configuration of one table version, derived from its protocol and metadata.

    Attributes:
        protocol: The protocol in force.
        metadata: The metadata in force.
        schema: The parsed table schema.
        properties: The interpreted ``delta.*``/``deltatx.*`` properties.
        reader_features: Reader features in force (explicit or implied by legacy versions).
        writer_features: Writer features in force (explicit or implied by legacy versions).
        column_mapping_mode: ``delta.columnMapping.mode``.
        physical_schema: The schema as data files store it (physical names; the schema
            itself without column mapping).
        change_data_feed: ``delta.enableChangeDataFeed``.
        invariants: The column invariants the schema declares.
        check_constraints: The CHECK constraints the properties declare.
    """

    protocol: ProtocolAction
    metadata: Metadata
    schema: StructType
    properties: TableProperties
    reader_features: frozenset[str]
    writer_features: frozenset[str]
    column_mapping_mode: ColumnMappingMode | str
    physical_schema: StructType
    change_data_feed: bool
    invariants: tuple[Invariant, ...]
    check_constraints: tuple[CheckConstraint, ...]

    @classmethod
    def of(cls, protocol: ProtocolAction, metadata: Metadata) -> TableConfiguration:
        """Derives the configuration of a table with this protocol and metadata.

        Raises:
            InvalidTableError: The schema string does not parse.
        """
        schema = parse_schema(metadata.schema_string)
        conf = metadata.configuration
        mode = mode_of(conf)
        constraints = tuple(
            CheckConstraint(key[len(CONSTRAINT_PREFIX) :], value)
            for key, value in sorted(conf.items())
            if key.lower().startswith(CONSTRAINT_PREFIX)
        )
        return cls(
            protocol=protocol,
            metadata=metadata,
            schema=schema,
            properties=TableProperties.from_configuration(conf),
            reader_features=reader_features(protocol),
            writer_features=writer_features(protocol),
            column_mapping_mode=mode,
            physical_schema=physical_schema(schema, mode),
            change_data_feed=conf.get(CHANGE_DATA_FEED, "false").strip().lower() == "true",
            invariants=tuple(_invariants(schema)),
            check_constraints=constraints,
        )

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns, in order."""
        return self.metadata.partition_columns

    @property
    def column_mapping(self) -> bool:
        """Whether data files, statistics and partition values use physical column names."""
        return is_mapped(self.column_mapping_mode)

    @property
    def physical_partition_columns(self) -> tuple[str, ...]:
        """The partition columns as ``partitionValues`` keys spell them."""
        return tuple(physical_columns(self.schema, self.partition_columns))

    @property
    def deletion_vectors_enabled(self) -> bool:
        """Whether DML writes deletion vectors: the property is on and the protocol names them."""
        return self.properties.enable_deletion_vectors and "deletionVectors" in self.writer_features

    @property
    def in_commit_timestamps(self) -> bool:
        """Whether commits record ``inCommitTimestamp``: the feature is there and enabled."""
        enabled = self.metadata.configuration.get(IN_COMMIT_TIMESTAMPS, "false")
        return enabled.strip().lower() == "true" and "inCommitTimestamp" in self.writer_features

    def in_commit_timestamps_enabled_by(self, previous: TableConfiguration | None) -> bool:
        """Whether a commit moving from ``previous`` to this configuration turns them on.

        The protocol asks such a commit (other than the table's creation) to record the
        version and time from which in-commit timestamps hold, in
        ``delta.inCommitTimestampEnablementVersion`` and ``...EnablementTimestamp``.
        """
        return (
            previous is not None and self.in_commit_timestamps and not previous.in_commit_timestamps
        )

    @property
    def v2_checkpoints(self) -> bool:
        """Whether checkpoints must follow the v2 spec (the ``v2Checkpoint`` feature)."""
        return "v2Checkpoint" in self.reader_features

    @property
    def append_only(self) -> bool:
        """Whether ``delta.appendOnly`` forbids removing or deleting rows."""
        return self.properties.append_only

    @property
    def isolation_level(self) -> IsolationLevel:
        """The table's isolation level (``delta.isolationLevel``)."""
        return self.properties.isolation_level

    @property
    def has_constraints(self) -> bool:
        """Whether the table declares invariants or CHECK constraints."""
        return bool(self.invariants or self.check_constraints)

    def check_writable(self) -> None:
        """Raises when deltatx cannot write this table (an unsupported writer feature in use).

        Raises:
            UnsupportedFeatureError: The protocol requires something deltatx does not implement;
                the error names the feature.
        """
        check_writable(self.protocol, self.metadata)

    @property
    def constraint_checks(self) -> tuple[tuple[str, str], ...]:
        """Every (name, SQL boolean) a written row must satisfy: invariants, then CHECKs."""
        return tuple(
            [(f"invariant on '{i.column}'", i.expression) for i in self.invariants]
            + [(f"CHECK constraint '{c.name}'", c.expression) for c in self.check_constraints]
        )

    def check_constraints_enforceable(self, path: str) -> None:
        """Refuses adding a file whose rows were not checked against the table's constraints.

        deltatx checks invariants and CHECK constraints on the rows its Spark commands write;
        a file staged any other way (the log API) has unchecked rows, which could break a
        constraint silently, and the protocol requires writers to enforce them.

        Args:
            path: The added file, named in the message.

        Raises:
            UnsupportedFeatureError: The table declares an invariant or a CHECK constraint.
        """
        checks = self.constraint_checks
        if not checks:
            return
        name, expression = checks[0]
        feature = "invariants" if self.invariants else "checkConstraints"
        raise UnsupportedFeatureError(
            f"the table declares the {name} ({expression}), and add {path!r} holds rows that "
            "were not checked against it; deltatx enforces constraints only on rows its "
            "commands write. Nothing was committed.",
            feature=feature,
        )


def _invariants(schema: StructType) -> Iterator[Invariant]:
    def walk(t: DataType, prefix: str) -> Iterator[Invariant]:
        if isinstance(t, StructType):
            for f in t.fields:
                path = f"{prefix}{f.name}"
                raw = f.metadata.get(INVARIANTS_KEY)
                if raw is not None:
                    yield Invariant(path, _invariant_expression(raw))
                yield from walk(f.type, path + ".")
        elif isinstance(t, ArrayType):
            yield from walk(t.element_type, prefix)
        elif isinstance(t, MapType):
            yield from walk(t.key_type, prefix)
            yield from walk(t.value_type, prefix)

    yield from walk(schema, "")


def _invariant_expression(raw: object) -> str:
    """The SQL of an invariant: ``{"expression": {"expression": "x > 0"}}`` as JSON text."""
    value: object = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return raw
    while isinstance(value, dict) and "expression" in value:
        value = value["expression"]
    return value if isinstance(value, str) else json.dumps(value)
