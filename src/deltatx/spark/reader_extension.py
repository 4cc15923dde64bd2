"""deltatx's reader extension: Spark's Parquet reader with deletion vectors applied in it.

Reading a table whose deletion vectors delete rows needs each row's position in its file.
Spark's Parquet reader fills a position column one boxed value at a time, and finding a row's
file from its metadata builds a struct per row: together they cost a read of 10% deleted rows
more than the read itself. ``DeletionVectorParquetFormat`` (Java, shipped with deltatx)
extends Spark's Parquet format instead: each task loads the vectors of its own files, counts
positions as the batches go by, and drops the deleted rows from each batch in place, so the
plan above the scan is Spark's plain Parquet plan.

The class is compiled on first use with Janino, the Java compiler Spark itself ships, so a
Java runtime without a JDK is enough; the jar is cached per source and Spark version under
``$DELTATX_CACHE_DIR`` (default ``~/.cache/deltatx``). :func:`deltatx.spark_session` puts it
on the classpath of the sessions it starts; for a session built elsewhere, add
:func:`extension_jar` to ``spark.jars``. Where the class is not loaded (or the session is a
Spark Connect client), scans apply deletion vectors with Spark SQL expressions instead: the
same rows, more slowly.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pyspark.sql import SparkSession

from deltatx.errors import ExtensionBuildError, InvalidArgumentError
from deltatx.java_check import find_java
from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import inline_bitmap, num_records
from deltatx.log.deletion_vectors import FIRST_DV_OFFSET, dv_file_location
from deltatx.spark.arrow_files import spark_uri
from deltatx.storage.location import Location

FORMAT_CLASS = "io.deltatx.spark.DeletionVectorParquetFormat"
"""The data source class Spark loads by name."""

VECTORS_OPTION = "deltatx.deletionVectors"
"""The reader option naming every file read and where its deletion vector is stored."""

ENABLED_SETTING = "spark.deltatx.readerExtension.enabled"
"""Session setting: ``false`` makes scans apply deletion vectors with Spark SQL expressions
even where the extension is loaded (default ``true``)."""

_SOURCE_SUFFIX = ".java"
_COMPILER_JARS = ("janino-", "commons-compiler-")
_COMPILER_MAIN = "org.codehaus.commons.compiler.samples.CompilerDemo"
_log = logging.getLogger(__name__)
_build_lock = threading.Lock()
# Per JVM gateway: whether the class loads there.
_loadable: dict[int, bool] = {}


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def cache_dir() -> Path:
    """Where built jars are kept: ``$DELTATX_CACHE_DIR``, else ``~/.cache/deltatx``."""
    configured = os.environ.get("DELTATX_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "deltatx"


def extension_jar() -> Path:
    """The reader extension's jar, compiled on first use and cached.

    Returns:
        The jar's path, named after a digest of the source and the PySpark version, so an
        upgrade of either builds a new one.

    Raises:
        ExtensionBuildError: No Java runtime, no Janino among PySpark's jars, or the compiler
            failed (its output is in the message).
    """
    import pyspark

    sources = _sources()
    digest = hashlib.sha256(pyspark.__version__.encode())
    for name, text in sources.items():
        digest.update(name.encode() + b"\0" + text)
    target = cache_dir() / f"deltatx-spark-{digest.hexdigest()[:16]}.jar"
    if target.is_file():
        return target
    with _build_lock:
        if not target.is_file():
            _build(sources, target)
    return target


def _sources() -> dict[str, bytes]:
    """The extension's Java sources by file name (every ``.java`` file shipped in ``jvm/``)."""
    folder = resources.files("deltatx.spark").joinpath("jvm")
    return {
        entry.name: entry.read_bytes()
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(_SOURCE_SUFFIX)
    }


def _build(sources: dict[str, bytes], target: Path) -> None:
    java = find_java()
    if java is None:
        raise ExtensionBuildError("no Java runtime to compile deltatx's reader extension with")
    jars = sorted(_pyspark_jars().glob("*.jar"))
    compiler = [j for j in jars if j.name.startswith(_COMPILER_JARS)]
    if len(compiler) != len(_COMPILER_JARS):
        raise ExtensionBuildError(f"Janino is not among PySpark's jars in {_pyspark_jars()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="deltatx-extension-") as work:
        files = []
        for name, text in sources.items():
            src = Path(work) / name
            src.write_bytes(text)
            files.append(str(src))
        classes = Path(work) / "classes"
        classes.mkdir()
        command = [
            java,
            "-cp",
            os.pathsep.join(map(str, compiler)),
            _COMPILER_MAIN,
            "-d",
            str(classes),
            "-classpath",
            os.pathsep.join(map(str, jars)),
            *files,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        built = sorted(classes.rglob("*.class"))
        if done.returncode != 0 or not built:
            output = (done.stdout + done.stderr).strip()
            raise ExtensionBuildError(f"compiling deltatx's reader extension failed: {output}")
        # Written beside the target and renamed: a process that finds the jar finds all of it.
        fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".jar.partial")
        os.close(fd)
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
                for path in built:
                    jar.write(path, path.relative_to(classes).as_posix())
            os.replace(partial, target)
        except BaseException:
            os.unlink(partial)
            raise


def session_jars(configured: str | None) -> str | None:
    """``spark.jars`` for a new session: ``configured`` plus the extension, when it builds.

    A failed build is logged, not raised: scans then take the slower path.
    """
    try:
        jar = str(extension_jar())
    except (ExtensionBuildError, OSError) as exc:
        _log.warning("deltatx reads deletion vectors without its reader extension: %s", exc)
        return configured
    return f"{configured},{jar}" if configured else jar


def reader_available(spark: SparkSession) -> bool:
    """Whether scans on ``spark`` use the extension.

    They do where the class is on the session's classpath (never on Spark Connect), unless
    the session setting :data:`ENABLED_SETTING` is ``false``.

    Raises:
        InvalidArgumentError: The setting is neither ``true`` nor ``false``.
    """
    jvm: Any = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    enabled = str(spark.conf.get(ENABLED_SETTING, "true")).strip().lower()
    if enabled not in ("true", "false"):
        raise InvalidArgumentError(
            f"Session setting {ENABLED_SETTING} must be 'true' or 'false', not {enabled!r}."
        )
    if enabled == "false":
        return False
    key = id(spark.sparkContext._gateway)
    found = _loadable.get(key)
    if found is None:
        try:
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(FORMAT_CLASS, False, loader)
            found = True
        except Exception:  # ClassNotFoundException: the session started without the jar
            found = False
        # A stopped gateway's entry is dropped with the next lookup of a new one.
        _loadable.clear()
        _loadable[key] = found
    return found


def vector_lines(
    location: Location, files: Sequence[AddFile], spark_paths: Sequence[str]
) -> dict[str, str]:
    """Each file's line of the :data:`VECTORS_OPTION` value, by the path Spark reads it at.

    A scan's option joins the lines of all the files it reads with newlines: a task meeting a
    file the option does not name fails rather than keep its rows. A stored vector is named
    by its file, offset, size and cardinality, with the data file's ``numRecords``; an
    inline one by its bitmap in hex. No deleted row id is in a line, except in inline
    vectors, which the log itself holds.
    """
    lines: dict[str, str] = {}
    for add, path in zip(files, spark_paths, strict=True):
        dv = add.deletion_vector
        name = quote(path, safe="")
        if dv is None:
            lines[path] = f"{name}\t-"
            continue
        # Only a file with a vector is counted against the log, so only its stats are parsed.
        records = num_records(add.stats)
        counted = str(-1 if records is None else records)
        if dv.storage_type == "i":
            # The payload is the serialized bitmap itself; the task checks it as it would a
            # stored one (magic, layout, cardinality).
            where = f"inline deletion vector (of data file {add.path})"
            bitmap = inline_bitmap(dv, where=where).hex()
            lines[path] = f"{name}\ti\t{bitmap}\t{dv.cardinality}\t{counted}"
        else:
            owner = f" (of data file {add.path})"
            stored = quote(
                spark_uri(location, dv_file_location(location, dv, owner=owner)), safe=""
            )
            offset = FIRST_DV_OFFSET if dv.offset is None else dv.offset
            fields = [stored, str(offset), str(dv.size_in_bytes), str(dv.cardinality), counted]
            lines[path] = f"{name}\tf\t" + "\t".join(fields)
    return lines
