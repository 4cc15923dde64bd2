"""The SparkSession deltatx runs on: the caller's active one, or a small local one."""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
import uuid
from collections.abc import Mapping

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from deltatx.errors import JavaNotFoundError
from deltatx.java_check import JAVA_REQUIRED_MESSAGE, find_java
from deltatx.progress import progress_enabled
from deltatx.spark.reader_extension import session_jars

# Settings for the embedded session. Two cores and a few GB are what a laptop or CI runner
# spares; four shuffle partitions keep small test jobs from spawning 200 tiny tasks. UTC and
# TIMESTAMP_MICROS make the files we write readable the same way by every Delta engine. Each is
# only a default: arguments, the environment and spark-defaults.conf override it.
DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "2g"
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
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
logger.utils.level = fatal
# A task that fails (a NULL in a NOT NULL column, a bad cast) reaches the caller as one typed
# deltatx error; Spark would first log the same failure with its stack trace from the executor,
# the task scheduler and the file writer, some 200 lines per failure.
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = fatal
logger.writer.name = org.apache.spark.sql.execution.datasources.FileFormatWriter
logger.writer.level = fatal
logger.committer.name = org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter
logger.committer.level = error
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


def _submit_args(env: Mapping[str, str]) -> tuple[str | None, str | None, dict[str, str]]:
    """Master, driver memory and ``--conf`` pairs from ``PYSPARK_SUBMIT_ARGS``."""
    words = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    master = memory = None
    conf: dict[str, str] = {}
    for i, word in enumerate(words):
        value = words[i + 1] if i + 1 < len(words) else ""
        name, eq, inline = word.partition("=")
        if eq and name in ("--master", "--driver-memory", "--conf"):
            word, value = name, inline
        if word == "--master":
            master = value
        elif word == "--driver-memory":
            memory = value
        elif word == "--conf":
            key, sep, val = value.partition("=")
            if sep:
                conf[key] = val
    return master, memory, conf


def _spark_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """The settings of ``$SPARK_CONF_DIR/spark-defaults.conf``, which Spark applies itself."""
    directory = env.get("SPARK_CONF_DIR")
    if not directory:
        return {}
    path = os.path.join(directory, "spark-defaults.conf")
    if not os.path.isfile(path):
        return {}
    found: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            words = line.strip().split(None, 1)
            if words and not words[0].startswith("#"):
                found[words[0]] = words[1].strip() if len(words) > 1 else ""
    return found


def session_configuration(
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    config: Mapping[str, str] | None = None,
    ui: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The settings a new local session starts with, most specific source first.

    Each setting comes from the argument if given, else from the environment Spark itself
    honours (``MASTER`` or ``SPARK_MASTER``, ``SPARK_DRIVER_MEMORY``, and ``--master``,
    ``--driver-memory`` and ``--conf key=value`` in ``PYSPARK_SUBMIT_ARGS``), else from
    ``$SPARK_CONF_DIR/spark-defaults.conf``, else deltatx's default (``local[2]``, 2 GB, no UI).

    Args:
        master: The Spark master URL, e.g. ``"local[8]"``.
        driver_memory: The driver's memory, e.g. ``"8g"``.
        config: Further Spark settings; they override everything else.
        ui: Whether to start the Spark web UI.
        env: The environment to read (default: ``os.environ``).

    Returns:
        Every ``spark.*`` setting the builder is given, ``spark.master`` included.
    """
    env = os.environ if env is None else env
    submit_master, submit_memory, submit_conf = _submit_args(env)
    settled = {**LOCAL_CONF, **_spark_defaults(env), **submit_conf}
    settled["spark.master"] = (
        master
        or env.get("MASTER")
        or env.get("SPARK_MASTER")
        or submit_master
        or settled.get("spark.master")
        or DEFAULT_MASTER
    )
    settled["spark.driver.memory"] = (
        driver_memory
        or env.get("SPARK_DRIVER_MEMORY")
        or submit_memory
        or settled.get("spark.driver.memory")
        or DEFAULT_DRIVER_MEMORY
    )
    if ui is not None:
        settled["spark.ui.enabled"] = "true" if ui else "false"
    if progress_enabled():
        # Spark's own stage bar (tasks done / total) under the phase lines of deltatx.progress.
        settled["spark.ui.showConsoleProgress"] = "true"
    settled.update(config or {})
    return settled


def spark_session(
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    config: Mapping[str, str] | None = None,
    ui: bool | None = None,
    app_name: str = "deltatx",
) -> SparkSession:
    """The active SparkSession, or a new local one with deltatx's defaults.

    With ``SPARK_REMOTE`` set, the session is a Spark Connect client to that server and no
    local Java is needed. Otherwise a new session runs Spark embedded, configured by
    :func:`session_configuration` (arguments, then ``MASTER``/``SPARK_MASTER``,
    ``SPARK_DRIVER_MEMORY``, ``PYSPARK_SUBMIT_ARGS`` and ``spark-defaults.conf``, then
    ``local[2]``, 2 GB, UTC, quiet logging, no UI). An existing active session is returned
    untouched, whatever the arguments say. Either way deltatx's data source is registered on
    it (see :func:`deltatx.configure`).

    Args:
        master: The Spark master URL, e.g. ``"local[8]"``.
        driver_memory: The driver's memory, e.g. ``"8g"``.
        config: Further Spark settings, e.g. ``{"spark.sql.shuffle.partitions": "64"}``.
        ui: Whether to start the Spark web UI (default: off).
        app_name: The application name Spark shows.

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
    settled = session_configuration(
        master=master, driver_memory=driver_memory, config=config, ui=ui
    )
    jars = session_jars(settled.get("spark.jars"))
    if jars:
        settled["spark.jars"] = jars
    builder = SparkSession.builder.appName(app_name)
    for key, value in settled.items():
        builder = builder.config(key, value)
    if not os.environ.get("PYSPARK_PYTHON"):
        # Python workers (the data source's planning and tasks, UDFs) must run an interpreter
        # that has deltatx and pyarrow, not whatever "python3" is first on the PATH; the JVM
        # reads this from its environment, which it inherits when it starts just below.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if not os.environ.get("SPARK_CONF_DIR") and "spark.driver.extraJavaOptions" not in settled:
        builder = builder.config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j2_profile()}"
        )
    return configure(builder.getOrCreate())
