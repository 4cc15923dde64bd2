"""DataFrame -> Parquet data files under the table root -> ``add`` actions with stats.

Spark writes the rows on the executors into a hidden staging directory under the table root;
the driver then moves each file to its final place, reads its Parquet footer (never the data)
to build statistics, and returns one :class:`AddFile` per file. Nothing here touches the log:
the files stay invisible until a commit adds them.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
import zoneinfo
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from deltatx.errors import InvalidArgumentError, SchemaMismatchError, StorageAccessError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode, physical_columns, physical_schema
from deltatx.kernel.log_paths import STAGING_PREFIX
from deltatx.kernel.schema import PrimitiveType, StructType
from deltatx.progress import step
from deltatx.spark import arrow_files
from deltatx.spark.arrow_files import spark_reaches, spark_uri
from deltatx.spark.partition_dirs import (
    HIVE_DEFAULT_PARTITION,
    unescape_partition_name,
)
from deltatx.spark.schema import (
    NOT_NULL_VIOLATION_MARKER,
    check_write_schema,
    conform_to_schema,
    from_spark_schema,
    rename_columns,
)
from deltatx.spark.stats import file_stats_json
from deltatx.storage.location import Location

_PUBLISH_THREADS = 16
_TIMESTAMP_TYPE_KEY = "spark.sql.parquet.outputTimestampType"
_SCHEME_AND_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?")
# Characters java.net.URI leaves as they are in a path: letters, digits, the unreserved marks,
# the punctuation a path may hold, and '/'. Everything else ASCII is percent-encoded.
_URI_PATH_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'(),;:$&+=@/"
)
# Non-ASCII characters java.net.URI still encodes: controls and space separators.
_QUOTED = frozenset({"Cc", "Zs", "Zl", "Zp"})
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00", "UTC+00:00"})
_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?$")


# --- locations and paths ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableLocation:
    """A table root as pyarrow (driver I/O) and Spark (executor I/O) each address it.

    Attributes:
        fs: The pyarrow filesystem holding the table.
        root: The root's path within ``fs``, without a trailing ``/``.
        spark_root: The root as a URI for Spark, without a trailing ``/``.
        location: The table's place on storage.
    """

    fs: pafs.FileSystem
    root: str
    spark_root: str
    location: Location

    @classmethod
    def parse(cls, table_path: str) -> TableLocation:
        """The table root of a path or URI, as storage resolves it.

        Raises:
            UnsupportedFeatureError: The URI names a store deltatx cannot use yet.
        """
        location = Location.of(table_path)
        root = location.root.rstrip("/")
        return cls(location.fs, location.fs_path(root), spark_uri(location, root), location)

    def fs_path(self, relative: str) -> str:
        """The pyarrow path of a file given by its on-disk path relative to the root."""
        return f"{self.root}/{relative}"

    def spark_path(self, relative: str) -> str:
        """The Spark path of a file given by its on-disk path relative to the root."""
        return f"{self.spark_root}/{relative}"


def encode_uri_path(path: str) -> str:
    """Percent-encodes an on-disk relative path the way ``java.net.URI`` encodes a path.

    This is the form of ``add.path`` that delta-spark writes (Hadoop's ``Path.toUri``): ``%``
    becomes ``%25``, a space ``%20``; characters a URI path may hold stay, and so do non-ASCII
    letters (URI "other" characters); control and space characters are encoded as UTF-8.
    """
    out: list[str] = []
    for ch in path:
        if ch in _URI_PATH_SAFE or (ord(ch) > 127 and unicodedata.category(ch) not in _QUOTED):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def decode_uri_path(path: str) -> str:
    """The on-disk path for an ``add.path`` (percent-decoding; ``+`` stays ``+``)."""
    return unquote(path)


def uri_path_key(spark_uri: str) -> str:
    """The encoded path component of a Spark file URI, as ``_metadata.file_path`` shows it.

    Scheme and authority are dropped so that ``file:/x`` and ``file:///x`` (or a qualified and
    an unqualified spelling of the same bucket) compare equal; repeated slashes collapse as
    Hadoop's ``Path`` collapses them.
    """
    path = _SCHEME_AND_AUTHORITY.sub("", spark_uri)
    path = re.sub(r"/{2,}", "/", path)
    return encode_uri_path(path)


# --- partition values -------------------------------------------------------------------------


def _session_zone(spark: SparkSession) -> tzinfo:
    name = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    if name in _UTC_NAMES:
        return UTC
    match = _OFFSET.match(name)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        minutes = int(match.group(2)) * 60 + int(match.group(3) or 0)
        return timezone(sign * timedelta(minutes=minutes))
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidArgumentError(
            f"Unknown spark.sql.session.timeZone '{name}'; partition values of timestamp "
            f"columns cannot be encoded."
        ) from None


def _normalize_fraction(text: str) -> str:
    """'YYYY-MM-DD HH:MM:SS[.f]' with the fraction, when present, at six digits."""
    if "." not in text:
        return text
    head, frac = text.split(".", 1)
    return f"{head}.{frac.ljust(6, '0')[:6]}"


def delta_partition_value(raw: str, type_name: str, zone: tzinfo) -> str | None:
    """A partition directory value (already unescaped) in Delta's partition value format.

    Spark renders partition values as Delta expects (dates ``YYYY-MM-DD``, booleans
    ``true``/``false``, numbers as written) except timestamps, which it renders in the
    session time zone: those stay ``YYYY-MM-DD HH:MM:SS[.ffffff]`` when that zone is UTC and
    otherwise become the unambiguous ISO-8601 UTC form the protocol also allows.
    """
    if raw == HIVE_DEFAULT_PARTITION:
        return None
    if type_name == "timestamp_ntz":
        return _normalize_fraction(raw)
    if type_name != "timestamp":
        return raw
    if zone is UTC:
        return _normalize_fraction(raw)
    local = datetime.fromisoformat(_normalize_fraction(raw)).replace(tzinfo=zone)
    return local.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _partition_values(
    rel_dirs: Sequence[str], partition_columns: Sequence[str], types: dict[str, str], zone: tzinfo
) -> dict[str, str | None]:
    if len(rel_dirs) != len(partition_columns):
        raise InvalidArgumentError(
            f"Spark wrote a file under '{'/'.join(rel_dirs)}', which does not match the "
            f"partition columns {list(partition_columns)}."
        )
    values: dict[str, str | None] = {}
    for directory, column in zip(rel_dirs, partition_columns, strict=True):
        name, sep, raw = directory.partition("=")
        if not sep or unescape_partition_name(name) != column:
            raise InvalidArgumentError(
                f"Unexpected partition directory '{directory}' for column '{column}'."
            )
        values[column] = delta_partition_value(unescape_partition_name(raw), types[column], zone)
    return values


# --- the write --------------------------------------------------------------------------------


def ensure_micros_timestamps(spark: SparkSession) -> None:
    """Makes Spark write timestamps as INT64 microseconds, never the legacy INT96."""
    if spark.conf.get(_TIMESTAMP_TYPE_KEY) != "TIMESTAMP_MICROS":
        spark.conf.set(_TIMESTAMP_TYPE_KEY, "TIMESTAMP_MICROS")


def resolve_partition_columns(schema: StructType, partition_columns: Sequence[str]) -> list[str]:
    """The partition columns as the schema spells them.

    Raises:
        SchemaMismatchError: A partition column is not in the schema, is not of a primitive
            type, or is every column of the schema.
    """
    resolved: list[str] = []
    for column in partition_columns:
        field = schema.get(column)
        if field is None:
            raise SchemaMismatchError(
                f"Partition column '{column}' is not a column of the table.", column=column
            )
        if not isinstance(field.type, PrimitiveType):
            raise SchemaMismatchError(
                f"Partition column '{column}' is not of a primitive type.", column=column
            )
        resolved.append(field.name)
    if resolved and len(resolved) == len(schema.fields):
        raise SchemaMismatchError("A table cannot be partitioned by all of its columns.")
    return resolved


def write_files(
    df: DataFrame,
    *,
    table_path: str,
    partition_columns: Sequence[str],
    schema: StructType,
    data_change: bool = True,
    target_file_rows: int | None = None,
    column_mapping: ColumnMappingMode | str = ColumnMappingMode.NONE,
) -> list[AddFile]:
    """Writes ``df`` as Parquet files under the table root and returns their ``add`` actions.

    The rows are written by Spark on the executors; the driver only moves the finished files
    and reads their footers for statistics. Columns are matched to ``schema`` by name
    (case-insensitively), put in its order and cast where a lossless cast is needed.

    Args:
        df: The rows to write.
        table_path: The table root (local path or URI).
        partition_columns: The table's partition columns, in order.
        schema: The table schema the data must fit (after any schema evolution).
        data_change: The ``dataChange`` flag of the returned actions.
        target_file_rows: At most this many rows per file (Spark's ``maxRecordsPerFile``).
        column_mapping: The table's column mapping mode; with one, the files, their
            statistics and partition values use the physical names ``schema`` declares (and
            Parquet field ids in id mode).

    Returns:
        One :class:`AddFile` per written file, none for an empty DataFrame.

    Raises:
        SchemaMismatchError: The data does not fit ``schema``, or a NULL reached a NOT NULL
            column; the message names the column.
        InvalidArgumentError: ``target_file_rows`` is not positive, or the path is unusable.
    """
    if target_file_rows is not None and target_file_rows <= 0:
        raise InvalidArgumentError(f"target_file_rows must be positive, got {target_file_rows}")
    columns = resolve_partition_columns(schema, partition_columns)
    check_write_schema(schema, from_spark_schema(df.schema), merge_schema=False)
    spark = df.sparkSession
    ensure_micros_timestamps(spark)
    location = TableLocation.parse(table_path)
    if not spark_reaches(spark, location.location):
        return _write_with_arrow(
            conform_to_schema(df, schema),
            location,
            columns=columns,
            schema=schema,
            data_change=data_change,
            target_file_rows=target_file_rows,
        )
    staging_rel = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging = location.fs_path(staging_rel)

    conformed = conform_to_schema(df, schema)
    physical = physical_schema(schema, column_mapping)
    if physical is not schema:
        conformed = rename_columns(conformed, schema, physical)
        columns = physical_columns(schema, columns)
        schema = physical
    writer = conformed.write.mode("error").format("parquet")
    if columns:
        writer = writer.partitionBy(*columns)
    if target_file_rows is not None:
        writer = writer.option("maxRecordsPerFile", str(target_file_rows))
    try:
        try:
            step("writing")
            writer.save(location.spark_path(staging_rel))
        except Exception as exc:
            _raise_not_null_violation(exc)
            _raise_storage_refusal(exc, table_path, columns)
            raise
        return _publish(
            location,
            staging,
            columns=columns,
            schema=schema,
            zone=_session_zone(spark),
            data_change=data_change,
        )
    finally:
        if location.fs.get_file_info(staging).type != pafs.FileType.NotFound:
            location.fs.delete_dir(staging)


def _write_with_arrow(
    df: DataFrame,
    location: TableLocation,
    *,
    columns: Sequence[str],
    schema: StructType,
    data_change: bool,
    target_file_rows: int | None,
) -> list[AddFile]:
    """The write where Spark cannot reach the store: pyarrow writes the files in the tasks."""
    try:
        step("writing")
        written = arrow_files.write_files(
            df, location.location, partition_columns=columns, target_file_rows=target_file_rows
        )
    except Exception as exc:
        _raise_not_null_violation(exc)
        raise
    partition_set = set(columns)
    data_schema = StructType(tuple(f for f in schema.fields if f.name not in partition_set))

    def describe(entry: tuple[str, dict[str, str | None]]) -> AddFile:
        rel, values = entry
        target = location.fs_path(rel)
        metadata = pq.read_metadata(target, filesystem=location.fs)
        info = location.fs.get_file_info(target)
        return AddFile(
            path=encode_uri_path(rel),
            partition_values=values,
            size=info.size,
            modification_time=info.mtime_ns // 1_000_000,
            data_change=data_change,
            stats=file_stats_json(metadata, data_schema),
        )

    with ThreadPoolExecutor(max_workers=_PUBLISH_THREADS) as pool:
        return list(pool.map(describe, written))


def _raise_not_null_violation(exc: Exception) -> None:
    text = str(exc)
    if NOT_NULL_VIOLATION_MARKER not in text:
        return
    match = re.search(r"NOT NULL column '((?:[^']|'')*)'", text)
    column = match.group(1) if match else None
    raise SchemaMismatchError(
        f"NULL value in NOT NULL column '{column}'; nothing was written.", column=column
    ) from None


# Spark reports a storage refusal as a Java exception whose text carries the OS's words; a
# name longer than the file system allows shows only as a directory it failed to create.
_NAME_TOO_LONG = re.compile(r"File name too long|ENAMETOOLONG", re.IGNORECASE)
_MKDIRS_FAILED = re.compile(r"Mkdirs failed to create (\S+)")
_NO_PERMISSION = re.compile(
    r"Permission denied|Operation not permitted|AccessDeniedException|EACCES|EPERM",
    re.IGNORECASE,
)
_MAX_NAME_BYTES = 255


def _raise_storage_refusal(exc: Exception, table_path: str, columns: Sequence[str]) -> None:
    text = str(exc)
    failed = _MKDIRS_FAILED.search(text)
    long_names = [
        part
        for part in (failed.group(1).split("/") if failed else ())
        if len(part.encode()) > _MAX_NAME_BYTES
    ]
    if long_names or _NAME_TOO_LONG.search(text):
        column = long_names[0].partition("=")[0] if long_names else None
        where = f"partition column '{column}'" if column in columns else "a partition value"
        raise InvalidArgumentError(
            f"{where}: a value is too long to be part of a directory name (file systems allow "
            f"{_MAX_NAME_BYTES} bytes per name). Shorten the values or partition by a shorter "
            "derived column; nothing was written."
        ) from None
    if failed or _NO_PERMISSION.search(text):
        raise StorageAccessError(
            f"cannot write data files under {table_path}: the storage refused (no permission "
            "to create files there). Check that this user may write the table directory; "
            "nothing was written.",
            path=table_path,
        ) from None


def _is_hidden(component: str) -> bool:
    """Spark's bookkeeping (``_SUCCESS``, ``_temporary``, ``.crc`` files), not a partition."""
    return component.startswith(".") or (component.startswith("_") and "=" not in component)


def _publish(
    location: TableLocation,
    staging: str,
    *,
    columns: Sequence[str],
    schema: StructType,
    zone: tzinfo,
    data_change: bool,
) -> list[AddFile]:
    fs = location.fs
    types = {f.name: f.type.name for f in schema.fields if isinstance(f.type, PrimitiveType)}
    partition_set = set(columns)
    data_schema = StructType(tuple(f for f in schema.fields if f.name not in partition_set))
    produced = []
    for info in fs.get_file_info(pafs.FileSelector(staging, recursive=True)):
        rel = info.path[len(staging) + 1 :]
        if (
            info.type == pafs.FileType.File
            and rel.endswith(".parquet")
            and not any(_is_hidden(part) for part in rel.split("/"))
        ):
            produced.append(rel)
    produced.sort()
    parents = sorted({rel.rpartition("/")[0] for rel in produced} - {""})
    # A partition directory that is a link out of the root would publish files elsewhere.
    location.location.refuse_links_out(
        [location.fs_path(rel) for rel in produced], what="partition"
    )
    for parent in parents:
        fs.create_dir(location.fs_path(parent), recursive=True)

    def publish_one(rel: str) -> AddFile | None:
        source = f"{staging}/{rel}"
        metadata = pq.read_metadata(source, filesystem=fs)
        if metadata.num_rows == 0:
            # Spark writes one empty file for an empty DataFrame, to keep its schema; a Delta
            # table keeps the schema in the log instead.
            return None
        *dirs, _ = rel.split("/")
        values = _partition_values(dirs, columns, types, zone)
        stats = file_stats_json(metadata, data_schema)
        target = location.fs_path(rel)
        fs.move(source, target)
        # Size and time of the published file: on object stores a move is a copy.
        info = fs.get_file_info(target)
        return AddFile(
            path=encode_uri_path(rel),
            partition_values=values,
            size=info.size,
            modification_time=info.mtime_ns // 1_000_000,
            data_change=data_change,
            stats=stats,
        )

    # Footer reads and moves are I/O round trips (slow on object stores): overlap them.
    with ThreadPoolExecutor(max_workers=_PUBLISH_THREADS) as pool:
        results = list(pool.map(publish_one, produced))
    return [add for add in results if add is not None]
