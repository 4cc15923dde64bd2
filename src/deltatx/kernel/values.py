"""Typed values for predicate evaluation: partition strings, statistics and literals.

The Delta log stores partition values as strings and statistics as JSON; predicates carry
Python literals. Everything is brought to one comparable Python value per column type here, so
that evaluation on a row and on file metadata agree. Timestamps become naive UTC datetimes plus
a flag that says whether the source carried a time zone (see :func:`coerce_literal`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

from deltatx.kernel.schema import DataType, PrimitiveType


class Kind(StrEnum):
    """The comparison family of a column type."""

    INTEGRAL = "integral"
    FRACTIONAL = "fractional"
    DECIMAL = "decimal"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMP_NTZ = "timestamp_ntz"
    STRING = "string"
    BINARY = "binary"


_KIND_BY_NAME = {
    "byte": Kind.INTEGRAL,
    "short": Kind.INTEGRAL,
    "integer": Kind.INTEGRAL,
    "long": Kind.INTEGRAL,
    "float": Kind.FRACTIONAL,
    "double": Kind.FRACTIONAL,
    "boolean": Kind.BOOLEAN,
    "date": Kind.DATE,
    "timestamp": Kind.TIMESTAMP,
    "timestamp_ntz": Kind.TIMESTAMP_NTZ,
    "string": Kind.STRING,
    "binary": Kind.BINARY,
}
NUMERIC_KINDS = frozenset({Kind.INTEGRAL, Kind.FRACTIONAL, Kind.DECIMAL})
TIMESTAMP_KINDS = frozenset({Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ})


class Uncoercible(Exception):
    """A value cannot be read as the requested kind; the caller must assume anything."""


@dataclass(frozen=True, slots=True)
class Typed:
    """A non-null comparable value and, for timestamps, whether its source had a zone."""

    value: Any
    aware: bool = False


def kind_of_type(data_type: DataType | None) -> Kind | None:
    """The kind of a schema type, or None for complex and unknown types."""
    if not isinstance(data_type, PrimitiveType):
        return None
    if data_type.name.startswith("decimal"):
        return Kind.DECIMAL
    return _KIND_BY_NAME.get(data_type.name)


def kind_of_value(value: Any) -> Kind | None:
    """The kind a Python value naturally belongs to (bool before int, datetime before date)."""
    if isinstance(value, bool):
        return Kind.BOOLEAN
    if isinstance(value, int):
        return Kind.INTEGRAL
    if isinstance(value, float):
        return Kind.FRACTIONAL
    if isinstance(value, Decimal):
        return Kind.DECIMAL
    if isinstance(value, datetime):
        return Kind.TIMESTAMP
    if isinstance(value, date):
        return Kind.DATE
    if isinstance(value, str):
        return Kind.STRING
    if isinstance(value, bytes | bytearray):
        return Kind.BINARY
    return None


def _timestamp(dt: datetime) -> Typed:
    if dt.tzinfo is None:
        return Typed(dt, aware=False)
    return Typed(dt.astimezone(UTC).replace(tzinfo=None), aware=True)


def _parse_timestamp(text: str) -> Typed:
    try:
        # Python 3.11 reads both 'YYYY-MM-DD HH:MM:SS[.ffffff]' and ISO-8601 with 'Z'.
        return _timestamp(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise Uncoercible(text) from None


def _parse_date(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise Uncoercible(text) from None


def parse_partition_value(text: str | None, kind: Kind | None) -> Typed | None:
    """Reads a partition value string; None (NULL) for ``None`` or ``''``.

    Raises:
        Uncoercible: The string is not a value of that kind.
    """
    if text is None or text == "":
        return None
    if kind is None or kind is Kind.STRING:
        return Typed(text)
    return coerce_literal(text, kind)


def parse_stat_value(value: Any, kind: Kind | None) -> Typed | None:
    """Reads a min/max statistic (JSON decoded with Decimal floats); None when unusable."""
    if value is None or isinstance(value, dict | list) or kind is None:
        return None
    try:
        match kind:
            case Kind.INTEGRAL | Kind.DECIMAL | Kind.FRACTIONAL:
                if isinstance(value, bool):
                    return None
                if isinstance(value, str):
                    if kind is Kind.FRACTIONAL and value.lower() == "nan":
                        return Typed(math.nan)
                    value = Decimal(value)
                if kind is Kind.INTEGRAL:
                    return Typed(int(value)) if value == int(value) else None
                if kind is Kind.FRACTIONAL:
                    return Typed(float(value))
                return Typed(Decimal(str(value)))
            case Kind.BOOLEAN:
                return Typed(value) if isinstance(value, bool) else None
            case Kind.DATE:
                return Typed(_parse_date(value)) if isinstance(value, str) else None
            case Kind.TIMESTAMP | Kind.TIMESTAMP_NTZ:
                return _parse_timestamp(value) if isinstance(value, str) else None
            case Kind.STRING:
                return Typed(value) if isinstance(value, str) else None
            case Kind.BINARY:
                return None
    except (Uncoercible, InvalidOperation, ValueError, OverflowError):
        return None


def coerced_value(value: Any, kind: Kind) -> Any:
    """``coerce_literal(value, kind).value``, without a ``Typed`` for the usual literals.

    Raises:
        Uncoercible: No safe conversion exists.
    """
    if _kept_as_is(value, kind):
        return value
    return coerce_literal(value, kind).value


def _kept_as_is(value: Any, kind: Kind) -> bool:
    # The usual literals (an integer for an integral column, text for a text one), which
    # coercion keeps as they are.
    t = type(value)
    return (t is int and kind is Kind.INTEGRAL) or (t is str and kind is Kind.STRING)


def coerce_literal(value: Any, kind: Kind) -> Typed:
    """Brings a non-null literal to a column's kind the way a comparison would.

    Only conversions whose result cannot disagree with Spark's implicit casts are made: a
    string literal becomes a date, timestamp or number, an integer widens to a fraction. A
    string column is never compared with a non-string literal here, because Spark would cast
    the column instead and order the values differently.

    Raises:
        Uncoercible: No safe conversion exists.
    """
    if _kept_as_is(value, kind):
        return Typed(value)
    match kind:
        case Kind.INTEGRAL:
            if isinstance(value, bool):
                raise Uncoercible(value)
            if isinstance(value, int):
                return Typed(value)
            if isinstance(value, float | Decimal):
                if isinstance(value, float) and not math.isfinite(value):
                    raise Uncoercible(value)
                return Typed(value)
            if isinstance(value, str):
                try:
                    return Typed(int(value.strip()))
                except ValueError:
                    raise Uncoercible(value) from None
        case Kind.FRACTIONAL | Kind.DECIMAL:
            if isinstance(value, bool):
                raise Uncoercible(value)
            if isinstance(value, float) and math.isnan(value):
                raise Uncoercible(value)
            if isinstance(value, int | float | Decimal):
                return Typed(value)
            if isinstance(value, str):
                try:
                    parsed = Decimal(value.strip())
                except InvalidOperation:
                    raise Uncoercible(value) from None
                if not parsed.is_finite():
                    raise Uncoercible(value)
                return Typed(parsed)
        case Kind.BOOLEAN:
            if isinstance(value, bool):
                return Typed(value)
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return Typed(value.strip().lower() == "true")
        case Kind.DATE:
            if isinstance(value, datetime):
                raise Uncoercible(value)
            if isinstance(value, date):
                return Typed(value)
            if isinstance(value, str):
                return Typed(_parse_date(value))
        case Kind.TIMESTAMP | Kind.TIMESTAMP_NTZ:
            if isinstance(value, datetime):
                return _timestamp(value)
            if isinstance(value, date):
                return Typed(datetime(value.year, value.month, value.day))
            if isinstance(value, str):
                return _parse_timestamp(value)
        case Kind.STRING:
            if isinstance(value, str):
                return Typed(value)
        case Kind.BINARY:
            if isinstance(value, bytes | bytearray):
                return Typed(bytes(value))
    raise Uncoercible(value)


# A naive timestamp is wall-clock time in some session zone; an aware one is an instant. When
# the two meet, any zone from UTC-12 to UTC+14 is possible, so bounds widen by that much.
ZONE_SLACK = timedelta(hours=14)
# Timestamp statistics are written truncated to milliseconds, so a maximum may be up to one
# millisecond below the largest value in the file.
STAT_TRUNCATION = timedelta(milliseconds=1)


_INTEGER_TEXT = re.compile(r"^-?[0-9]+$")


def string_as_integer(text: str, literal: Any) -> Typed | None:
    """A string value read as the integer an integer literal is compared with, if it is one.

    Spark compares a string column with an integer literal by casting the string to an
    integer; only strings that are plain integers are read that way here, since others
    (``'1.5'``, ``' 1'``) cast differently across Spark versions and modes.
    """
    if isinstance(literal, int) and not isinstance(literal, bool) and _INTEGER_TEXT.match(text):
        return Typed(int(text))
    return None


def compare(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 for two non-null values of one kind; None when they do not compare."""
    try:
        if a < b:
            return -1
        if a > b:
            return 1
        if a == b:
            return 0
    except TypeError:
        return None
    return None  # NaN compares with nothing
