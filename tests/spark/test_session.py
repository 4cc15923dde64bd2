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


# -- configuration of a new local session (no JVM: the settings only) ------------------------


def test_defaults_without_arguments_or_environment() -> None:
    settled = session_module.session_configuration(env={})
    assert settled["spark.master"] == "local[2]"
    assert settled["spark.driver.memory"] == "2g"
    assert settled["spark.ui.enabled"] == "false"
    assert settled["spark.sql.session.timeZone"] == "UTC"


def test_environment_spark_honours() -> None:
    env = {
        "MASTER": "local[6]",
        "SPARK_DRIVER_MEMORY": "6g",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.shuffle.partitions=16 pyspark-shell",
    }
    settled = session_module.session_configuration(env=env)
    assert settled["spark.master"] == "local[6]"
    assert settled["spark.driver.memory"] == "6g"
    assert settled["spark.sql.shuffle.partitions"] == "16"


def test_submit_args_give_master_and_memory() -> None:
    env = {"PYSPARK_SUBMIT_ARGS": "--master local[3] --driver-memory=5g pyspark-shell"}
    settled = session_module.session_configuration(env=env)
    assert (settled["spark.master"], settled["spark.driver.memory"]) == ("local[3]", "5g")


def test_spark_defaults_conf_is_not_overridden(tmp_path: object) -> None:
    from pathlib import Path

    conf_dir = Path(str(tmp_path))
    (conf_dir / "spark-defaults.conf").write_text(
        "# comment\nspark.sql.shuffle.partitions   32\nspark.master local[5]\n"
    )
    settled = session_module.session_configuration(env={"SPARK_CONF_DIR": str(conf_dir)})
    assert settled["spark.sql.shuffle.partitions"] == "32"
    assert settled["spark.master"] == "local[5]"


def test_arguments_win_over_the_environment() -> None:
    env = {"MASTER": "local[6]", "SPARK_DRIVER_MEMORY": "6g"}
    settled = session_module.session_configuration(
        master="local[1]",
        driver_memory="1g",
        ui=True,
        config={"spark.sql.shuffle.partitions": "8"},
        env=env,
    )
    assert settled["spark.master"] == "local[1]"
    assert settled["spark.driver.memory"] == "1g"
    assert settled["spark.ui.enabled"] == "true"
    assert settled["spark.sql.shuffle.partitions"] == "8"


def test_a_failed_task_is_one_typed_error_without_java_stack_traces(
    spark: SparkSession, tmp_path: object, capfd: pytest.CaptureFixture[str]
) -> None:
    from deltatx import DeltaTable, SchemaMismatchError, write

    path = f"{tmp_path}/t"
    DeltaTable.create(spark, path, schema="id BIGINT NOT NULL, v STRING")
    rows = spark.createDataFrame([(None, "x"), (1, "y")], "id BIGINT, v STRING")
    capfd.readouterr()
    with pytest.raises(SchemaMismatchError, match="NOT NULL column 'id'"):
        write(rows, path, mode="append")
    err = capfd.readouterr().err
    assert "\tat org.apache" not in err and "Exception in task" not in err, err[:2000]
