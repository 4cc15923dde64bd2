"""Where the Spark session has Hadoop's S3A connector, Spark itself carries the data files.

The connector's jars are vendored beside the repository (``DELTATX_HADOOP_AWS_JARS``, or
``../shared/vendor/hadoop-aws/jars``); the test is skipped where they are absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deltatx.storage.s3 import S3LogStore

pytestmark = pytest.mark.s3

HERE = Path(__file__).parent
JARS = Path(
    os.environ.get(
        "DELTATX_HADOOP_AWS_JARS",
        HERE.parents[1].parent / "shared" / "vendor" / "hadoop-aws" / "jars",
    )
)


@pytest.mark.skipif(not list(JARS.glob("hadoop-aws-*.jar")), reason="no hadoop-aws jars")
def test_spark_writes_and_reads_through_s3a_when_it_has_the_connector(s3_table: str) -> None:
    table = s3_table.replace("s3://", "s3a://", 1)
    done = subprocess.run(
        [sys.executable, str(HERE / "s3a_process.py"), str(JARS), table],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.pop("vectors") >= 1, "the deletes must leave files with deletion vectors"
    assert result == {"reaches": True, "rows": [4, 5, 6, 7, 8, 9], "version": 2, "extension": True}
    data = [s.path for s in S3LogStore().walk(s3_table) if s.path.endswith(".parquet")]
    assert data and not any("_staging" in p or "/." in p for p in data if "_delta_log" not in p)
