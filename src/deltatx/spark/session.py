"""The SparkSession deltatx runs on: the caller's active one, or a small local one."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import uuid

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from deltatx.errors import JavaNotFoundError
from deltatx.java_check import JAVA_REQUIRED_MESSAGE, find_java

# Settings for the embedded session. Two cores and a few GB are what a laptop or CI runner
# spares; four shuffle partitions keep small test jobs from spawning 200 tiny tasks. UTC and
# TIMESTAMP_MICROS make the files we write readable the same way by every Delta engine.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.driver.memory": "2g",
    "spark.driver.maxResultSize": "1g",
    "spark.log.level": "WARN",
    # Everything runs in one process on loopback; binding there avoids the hostname warning.
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}

# Spark's bundled log4j profile logs at INFO until the context applies spark.log.level, and
# announces itself on stderr; this profile starts at WARN and silences two harmless startup
# warnings (no native Hadoop library, loopback hostname).
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""


def _log4j2_profile() -> str:
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"deltatx-log4j2-{digest}.properties")
    fs = pafs.LocalFileSystem()
    if fs.get_file_info(path).type == pafs.FileType.File:
        return path
    # Another process may be starting Spark too: write aside, then rename into place, so that
    # no JVM ever reads a half-written profile.
    partial = f"{path}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(partial) as out:
        out.write(_LOG4J2.encode())
    fs.move(partial, path)
    return path


def _active_session() -> SparkSession | None:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    try:
        # The default session of another thread counts too; active() raises when there is none.
        return SparkSession.active()
    except Exception:
        return None


def spark_session() -> SparkSession:
    """The active SparkSession, or a new local one with deltatx's defaults.

    With ``SPARK_REMOTE`` set, the session is a Spark Connect client to that server and no
    local Java is needed. Otherwise a new session runs Spark embedded (``local[2]``, UTC,
    quiet logging); an existing active session is returned as it is. Either way deltatx's
    data source is registered on it (see :func:`deltatx.configure`).

    Returns:
        The session to run deltatx's Spark work on.

    Raises:
        JavaNotFoundError: A local session is needed and no Java runtime is installed.
    """
    from deltatx.spark.datasource import configure

    active = _active_session()
    if active is not None:
        return configure(active)
    if os.environ.get("SPARK_REMOTE"):
        return configure(SparkSession.builder.getOrCreate())
    if find_java() is None:
        raise JavaNotFoundError(JAVA_REQUIRED_MESSAGE)
    builder = SparkSession.builder.master("local[2]").appName("deltatx")
    for key, value in LOCAL_CONF.items():
        builder = builder.config(key, value)
    if not os.environ.get("PYSPARK_PYTHON"):
        # Python workers (the data source's planning and tasks, UDFs) must run an interpreter
        # that has deltatx and pyarrow, not whatever "python3" is first on the PATH; the JVM
        # reads this from its environment, which it inherits when it starts just below.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if not os.environ.get("SPARK_CONF_DIR"):
        builder = builder.config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j2_profile()}"
        )
    return configure(builder.getOrCreate())
