from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyspark.sql import SparkSession

from deltatx.errors import DeltaError, JavaNotFoundError
from deltatx.java_check import JAVA_REQUIRED_MESSAGE
from deltatx.spark import session as session_module
from deltatx.spark.session import spark_session


def test_the_active_session_is_reused(spark: SparkSession) -> None:
    assert spark_session() is spark


def test_local_defaults(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"


def test_missing_java_raises_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "_active_session", lambda: None)
    monkeypatch.setattr(session_module, "find_java", lambda: None)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    with pytest.raises(JavaNotFoundError) as info:
        spark_session()
    assert isinstance(info.value, DeltaError)
    message = str(info.value)
    assert "\n" not in message
    assert "Java 17" in message and "JAVA_HOME" in message


def _java_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deltatx.java_check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_java_check_command_without_java() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    result = _java_check(env)
    assert result.returncode == 1
    assert result.stderr.strip() == JAVA_REQUIRED_MESSAGE
    assert result.stdout == ""


def test_java_check_command_with_java() -> None:
    result = _java_check(dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_java_check_does_not_load_pyspark() -> None:
    code = "import sys, deltatx.java_check; assert 'pyspark' not in sys.modules"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
