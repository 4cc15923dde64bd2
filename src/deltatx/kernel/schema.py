"""The Delta schema JSON model (``schemaString``): struct, array, map and primitive types."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from deltatx.errors import InvalidTableError

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
PRIMITIVE_TYPES: frozenset[str] = frozenset(
    {
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "boolean",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "variant",
        # Spark's NullType: delta-spark keeps such a column in the schema and stores no data
        # for it, so readers see it as all NULL.
        "void",
    }
)


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    """A primitive type by its protocol name (``long``, ``decimal(10,2)``, ...)."""

    name: str


@dataclass(frozen=True, slots=True)
class ArrayType:
    """An array of ``element_type``."""

    element_type: DataType
    contains_null: bool = True


@dataclass(frozen=True, slots=True)
class MapType:
    """A map from ``key_type`` to ``value_type``."""

    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True


@dataclass(frozen=True, slots=True)
class StructField:
    """A named field of a struct."""

    name: str
    type: DataType
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StructType:
    """A struct: the table schema is one."""

    fields: tuple[StructField, ...] = ()

    def field_names(self) -> list[str]:
        """The top-level field names, in order."""
        return [f.name for f in self.fields]

    def get(self, name: str) -> StructField | None:
        """The field named ``name`` (case-insensitive, as Spark resolves by default)."""
        lowered = name.lower()
        for f in self.fields:
            if f.name.lower() == lowered:
                return f
        return None

    def to_json(self) -> str:
        """The compact ``schemaString`` form."""
        return json.dumps(_type_to_obj(self), separators=(",", ":"))


DataType = PrimitiveType | ArrayType | MapType | StructType


def _type_from_obj(obj: Any, where: str) -> DataType:
    if isinstance(obj, str):
        if obj in PRIMITIVE_TYPES or _DECIMAL.match(obj):
            return PrimitiveType(obj.replace(" ", ""))
        raise InvalidTableError(f"{where}: unknown type '{obj}'")
    if not isinstance(obj, dict):
        raise InvalidTableError(f"{where}: a type must be a string or an object")
    kind = obj.get("type")
    if kind == "struct":
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise InvalidTableError(f"{where}: struct without a 'fields' list")
        return StructType(tuple(_field_from_obj(f, where) for f in fields))
    if kind == "array":
        return ArrayType(
            _type_from_obj(obj.get("elementType"), where + ".element"),
            bool(obj.get("containsNull", True)),
        )
    if kind == "map":
        return MapType(
            _type_from_obj(obj.get("keyType"), where + ".key"),
            _type_from_obj(obj.get("valueType"), where + ".value"),
            bool(obj.get("valueContainsNull", True)),
        )
    raise InvalidTableError(f"{where}: unknown type object {json.dumps(obj)[:80]}")


def _field_from_obj(obj: Any, where: str) -> StructField:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise InvalidTableError(f"{where}: a field must be an object with a 'name'")
    name = obj["name"]
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidTableError(f"{where}.{name}: 'metadata' must be an object")
    return StructField(
        name=name,
        type=_type_from_obj(obj.get("type"), f"{where}.{name}"),
        nullable=bool(obj.get("nullable", True)),
        metadata=meta,
    )


def _type_to_obj(t: DataType) -> Any:
    match t:
        case PrimitiveType():
            return t.name
        case ArrayType():
            return {
                "type": "array",
                "elementType": _type_to_obj(t.element_type),
                "containsNull": t.contains_null,
            }
        case MapType():
            return {
                "type": "map",
                "keyType": _type_to_obj(t.key_type),
                "valueType": _type_to_obj(t.value_type),
                "valueContainsNull": t.value_contains_null,
            }
        case StructType():
            return {
                "type": "struct",
                "fields": [
                    {
                        "name": f.name,
                        "type": _type_to_obj(f.type),
                        "nullable": f.nullable,
                        "metadata": f.metadata,
                    }
                    for f in t.fields
                ],
            }


def parse_schema(schema_string: str) -> StructType:
    """Parses a ``schemaString``.

    Raises:
        InvalidTableError: The string is not JSON or not a struct type.
    """
    try:
        obj = json.loads(schema_string)
        result = _type_from_obj(obj, "schema")
    except json.JSONDecodeError as exc:
        raise InvalidTableError(f"schemaString is not valid JSON: {exc.msg}") from None
    except RecursionError:
        # Hostile nesting must not escape as a bare RecursionError.
        raise InvalidTableError("schemaString is nested too deeply") from None
    if not isinstance(result, StructType):
        raise InvalidTableError("schemaString must describe a struct")
    return result


def is_complex(t: DataType) -> bool:
    """Whether a type is a struct, array or map."""
    return not isinstance(t, PrimitiveType)
