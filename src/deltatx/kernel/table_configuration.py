"""How one version of a table is configured: every derived fact, computed once.

Protocol, metadata, schema and properties together answer questions such as "may DML write
deletion vectors?" or "is the table append-only?". Answering them in several places led to
several answers; a :class:`TableConfiguration` is built once per snapshot (and once per staged
metadata or protocol change) and every layer asks it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError
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
from deltatx.kernel.properties import CONSTRAINT_PREFIX, TableProperties
from deltatx.kernel.schema import ArrayType, DataType, MapType, StructType, parse_schema

INVARIANTS_KEY = "delta.invariants"
GENERATION_EXPRESSION_KEY = "delta.generationExpression"
IDENTITY_KEY_PREFIX = "delta.identity."
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
class GeneratedColumn:
    """A generated column (``delta.generationExpression`` in a top-level field's metadata).

    Attributes:
        column: The column's name.
        expression: The SQL that computes it from the row's other columns.
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
        generated_columns: The generated columns the schema declares.
        identity_columns: The names of the identity columns the schema declares.
        physical_partition_columns: The partition columns as ``partitionValues`` keys spell
            them.
        in_commit_timestamps: Whether commits record ``inCommitTimestamp``: the feature is
            there and enabled.
        unwritable: Why deltatx cannot write the table (message and feature), or None.
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
    generated_columns: tuple[GeneratedColumn, ...] = ()
    identity_columns: tuple[str, ...] = ()
    physical_partition_columns: tuple[str, ...] = ()
    in_commit_timestamps: bool = False
    unwritable: tuple[str, str | None] | None = None

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
        writer = writer_features(protocol)
        # Every commit asks these; they are answered once per protocol and metadata.
        try:
            check_writable(protocol, metadata)
            unwritable = None
        except UnsupportedFeatureError as exc:
            unwritable = (str(exc), exc.feature)
        ict = conf.get(IN_COMMIT_TIMESTAMPS, "false").strip().lower() == "true"
        return cls(
            protocol=protocol,
            metadata=metadata,
            schema=schema,
            properties=TableProperties.from_configuration(conf),
            reader_features=reader_features(protocol),
            writer_features=writer,
            column_mapping_mode=mode,
            physical_schema=physical_schema(schema, mode),
            change_data_feed=conf.get(CHANGE_DATA_FEED, "false").strip().lower() == "true",
            invariants=tuple(_invariants(schema)),
            check_constraints=constraints,
            generated_columns=generated_columns(schema),
            identity_columns=identity_columns(schema),
            physical_partition_columns=tuple(physical_columns(schema, metadata.partition_columns)),
            in_commit_timestamps=ict and "inCommitTimestamp" in writer,
            unwritable=unwritable,
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
    def deletion_vectors_enabled(self) -> bool:
        """Whether DML writes deletion vectors: the property is on and the protocol names them."""
        return self.properties.enable_deletion_vectors and "deletionVectors" in self.writer_features

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
        if self.unwritable is not None:
            message, feature = self.unwritable
            raise UnsupportedFeatureError(message, feature=feature)

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


def generated_columns(schema: StructType) -> tuple[GeneratedColumn, ...]:
    """The generated columns a schema declares, in column order."""
    return tuple(
        GeneratedColumn(f.name, str(f.metadata[GENERATION_EXPRESSION_KEY]))
        for f in schema.fields
        if f.metadata.get(GENERATION_EXPRESSION_KEY) is not None
    )


def identity_columns(schema: StructType) -> tuple[str, ...]:
    """The identity columns a schema declares (``delta.identity.*`` field metadata)."""
    return tuple(
        f.name
        for f in schema.fields
        if any(str(k).startswith(IDENTITY_KEY_PREFIX) for k in f.metadata)
    )


def with_generation_expressions(schema: StructType, expressions: Mapping[str, str]) -> StructType:
    """The schema with ``delta.generationExpression`` set on the named top-level columns.

    Raises:
        InvalidArgumentError: A name is not a column, or an expression is empty.
    """
    wanted = {k.lower(): (k, v) for k, v in expressions.items()}
    fields = []
    for f in schema.fields:
        entry = wanted.pop(f.name.lower(), None)
        if entry is None:
            fields.append(f)
            continue
        if not entry[1].strip():
            raise InvalidArgumentError(f"generated column '{f.name}' needs an expression")
        fields.append(replace(f, metadata={**f.metadata, GENERATION_EXPRESSION_KEY: entry[1]}))
    if wanted:
        missing = ", ".join(name for name, _ in wanted.values())
        raise InvalidArgumentError(f"generated column(s) {missing} are not in the schema")
    return StructType(tuple(fields))


_CONSTRAINT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def constraint_key(name: str) -> str:
    """The table property that holds the CHECK constraint ``name`` (names are case-insensitive).

    Raises:
        InvalidArgumentError: The name is not an identifier.
    """
    if not isinstance(name, str) or not _CONSTRAINT_NAME.match(name):
        raise InvalidArgumentError(
            f"constraint name {name!r} must be an identifier (letters, digits and _, not "
            "starting with a digit)"
        )
    return CONSTRAINT_PREFIX + name.lower()


def with_check_constraint(
    configuration: Mapping[str, str], name: str, expression: str
) -> dict[str, str]:
    """The configuration with a new CHECK constraint.

    Raises:
        InvalidArgumentError: The name is not an identifier, the expression is empty, or the
            table already has a constraint of that name.
    """
    key = constraint_key(name)
    if not expression.strip():
        raise InvalidArgumentError(f"CHECK constraint '{name}' needs a boolean expression")
    existing = next((k for k in configuration if k.lower() == key), None)
    if existing is not None:
        raise InvalidArgumentError(
            f"the table already has a constraint named '{name}' "
            f"({configuration[existing]}); drop it first"
        )
    return {**configuration, key: expression}


def without_check_constraint(
    configuration: Mapping[str, str], name: str, *, if_exists: bool
) -> dict[str, str] | None:
    """The configuration without the CHECK constraint ``name``; None when there is none.

    Raises:
        InvalidArgumentError: There is no such constraint and ``if_exists`` is False.
    """
    key = constraint_key(name)
    existing = [k for k in configuration if k.lower() == key]
    if not existing:
        if if_exists:
            return None
        names = [
            k[len(CONSTRAINT_PREFIX) :] for k in configuration if k.startswith(CONSTRAINT_PREFIX)
        ]
        raise InvalidArgumentError(
            f"the table has no constraint named '{name}' (constraints: "
            f"{', '.join(names) or 'none'}); use if_exists to ignore a missing one"
        )
    return {k: v for k, v in configuration.items() if k not in existing}


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
