"""Table names: where a named Delta table lives, through Spark's catalog or deltatx's own.

A name resolves through Spark's session catalog when that catalog holds it (a table registered
with a location, e.g. in a Hive metastore). Otherwise it resolves through the deltatx catalog:
one small JSON file per table under ``<warehouse>/_deltatx_catalog/<database>/``, where the
warehouse is ``spark.sql.warehouse.dir``. Those files outlive the session, so a name created
today resolves in tomorrow's session that uses the same warehouse.

Managed tables live where Spark puts its own: ``<warehouse>/<name>`` in the ``default``
database, ``<warehouse>/<database>.db/<name>`` in others.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltatx.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from deltatx.kernel.file_paths import table_root
from deltatx.log.delta_log import DeltaLog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_DATABASE = "default"
CATALOG_DIR = "_deltatx_catalog"
_DELTA_PROVIDERS = frozenset({"delta", "deltatx"})


@dataclass(frozen=True, slots=True)
class TableIdentifier:
    """A table name: database and table, compared case-insensitively as Spark does."""

    database: str
    table: str

    @classmethod
    def parse(cls, name: str) -> TableIdentifier:
        """Reads ``t``, ``db.t``, ``spark_catalog.db.t`` (parts may be in backquotes).

        Raises:
            InvalidArgumentError: The name is empty or has too many parts.
        """
        parts = _split_name(name)
        if parts and len(parts) == 3 and parts[0].lower() == "spark_catalog":
            parts = parts[1:]
        if not parts or len(parts) > 2 or any(not p for p in parts):
            raise InvalidArgumentError(f"'{name}' is not a table name (use name or database.name)")
        if len(parts) == 1:
            return cls(DEFAULT_DATABASE, parts[0].lower())
        return cls(parts[0].lower(), parts[1].lower())

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


def _split_name(name: str) -> list[str]:
    parts: list[str] = []
    current = ""
    quoted = False
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "`":
            if quoted and name[i + 1 : i + 2] == "`":
                current += "`"
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
        i += 1
    parts.append(current.strip())
    return parts


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One named table in the deltatx catalog.

    Attributes:
        identifier: The table's name.
        location: The table root.
        managed: True when the catalog chose the location (DROP TABLE deletes the data).
    """

    identifier: TableIdentifier
    location: str
    managed: bool


class Catalog:
    """The deltatx catalog under one warehouse directory."""

    def __init__(self, warehouse: str) -> None:
        """``warehouse`` is a local path or ``file:`` URI."""
        self.warehouse = table_root(warehouse)

    @classmethod
    def for_session(cls, spark: SparkSession) -> Catalog:
        """The catalog under the session's ``spark.sql.warehouse.dir``."""
        return cls(warehouse_dir(spark))

    def managed_location(self, ident: TableIdentifier) -> str:
        """Where a managed table with this name lives (as Spark lays out managed tables)."""
        if ident.database == DEFAULT_DATABASE:
            return os.path.join(self.warehouse, ident.table)
        return os.path.join(self.warehouse, f"{ident.database}.db", ident.table)

    def _entry_path(self, ident: TableIdentifier) -> str:
        return os.path.join(self.warehouse, CATALOG_DIR, ident.database, f"{ident.table}.json")

    def lookup(self, ident: TableIdentifier) -> CatalogEntry | None:
        """The entry for ``ident``, or None."""
        try:
            with open(self._entry_path(ident), encoding="utf-8") as f:
                raw = json.load(f)
        except FileNotFoundError:
            return None
        return CatalogEntry(ident, str(raw["location"]), bool(raw["managed"]))

    def register(self, ident: TableIdentifier, location: str, *, managed: bool) -> CatalogEntry:
        """Records ``ident`` -> ``location``; the name must be free.

        The entry is written aside and linked into place, so two sessions registering the
        same name at once cannot both succeed.

        Raises:
            TableAlreadyExistsError: The name is taken.
        """
        path = self._entry_path(ident)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        entry = CatalogEntry(ident, table_root(location), managed)
        partial = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(
                {"name": str(ident), "location": entry.location, "managed": managed},
                f,
                sort_keys=True,
            )
        try:
            os.link(partial, path)
        except FileExistsError:
            raise TableAlreadyExistsError(f"table {ident} already exists") from None
        finally:
            os.remove(partial)
        return entry

    def unregister(self, ident: TableIdentifier) -> CatalogEntry | None:
        """Forgets ``ident``; returns the entry it had (None when there was none)."""
        entry = self.lookup(ident)
        if entry is not None:
            os.remove(self._entry_path(ident))
        return entry

    def drop(self, ident: TableIdentifier) -> CatalogEntry | None:
        """Forgets ``ident`` and, for a managed table, deletes its directory."""
        entry = self.unregister(ident)
        if entry is not None and entry.managed:
            shutil.rmtree(entry.location, ignore_errors=True)
        return entry

    def tables(self, database: str = DEFAULT_DATABASE) -> list[CatalogEntry]:
        """Every table recorded in ``database``, by name."""
        folder = os.path.join(self.warehouse, CATALOG_DIR, database.lower())
        try:
            names = sorted(n[: -len(".json")] for n in os.listdir(folder) if n.endswith(".json"))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            entry = self.lookup(TableIdentifier(database.lower(), name))
            if entry is not None:
                out.append(entry)
        return out


def warehouse_dir(spark: SparkSession) -> str:
    """The session's warehouse directory (``spark.sql.warehouse.dir``)."""
    value = spark.conf.get("spark.sql.warehouse.dir", None)
    return value or os.path.abspath("spark-warehouse")


def spark_catalog_location(spark: SparkSession, name: str) -> tuple[bool, str | None]:
    """Whether Spark's catalog knows ``name`` and, if it holds a Delta table, its location.

    A temporary view or a non-Delta table is Spark's own: (True, None).
    """
    try:
        if not spark.catalog.tableExists(name):
            return False, None
        quoted = ".".join(f"`{p.replace('`', '``')}`" for p in _split_name(name))
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
    except Exception:
        return False, None
    info = {str(r[0]).strip(): str(r[1] or "").strip() for r in rows}
    location = info.get("Location") or None
    provider = info.get("Provider", "").lower()
    if location is None:
        return True, None
    if provider in _DELTA_PROVIDERS or DeltaLog.for_table(location).table_exists():
        return True, table_root(location)
    return True, None


def identifier(spark: SparkSession, name: str) -> TableIdentifier:
    """``name`` as an identifier; a bare name is in the session's current database.

    Raises:
        InvalidArgumentError: The name is not a table name.
    """
    ident = TableIdentifier.parse(name)
    if len(_split_name(name)) == 1:
        try:
            current = spark.catalog.currentDatabase()
        except Exception:
            current = DEFAULT_DATABASE
        return TableIdentifier(current.lower(), ident.table)
    return ident


def resolve_name(spark: SparkSession, name: str) -> str | None:
    """The root of the Delta table named ``name``, or None when the name is not a Delta table.

    Spark's catalog is asked first (a temporary view or Spark table of that name wins, as in
    Spark); then the deltatx catalog.
    """
    try:
        ident = identifier(spark, name)
    except InvalidArgumentError:
        return None
    known, location = spark_catalog_location(spark, name)
    if known:
        return location
    entry = Catalog.for_session(spark).lookup(ident)
    return None if entry is None else entry.location


def table_path(spark: SparkSession, name: str) -> str:
    """Like :func:`resolve_name`, but a missing table is an error.

    Raises:
        TableNotFoundError: No Delta table has that name.
    """
    path = resolve_name(spark, name)
    if path is None:
        raise TableNotFoundError(
            f"there is no Delta table named {name} (neither in Spark's catalog nor in the "
            f"deltatx catalog under {warehouse_dir(spark)})"
        )
    return path


__all__ = [
    "Catalog",
    "CatalogEntry",
    "TableIdentifier",
    "identifier",
    "resolve_name",
    "spark_catalog_location",
    "table_path",
    "warehouse_dir",
]
