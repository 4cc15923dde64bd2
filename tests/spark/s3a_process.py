"""A Spark session with Hadoop's S3A connector, writing and reading a table on s3a://.

Run by ``test_s3a.py`` in its own process (the connector's jars must be on the class path
when the JVM starts): argv is the jars directory and the table URI; prints one JSON line.
"""

from __future__ import annotations

import glob
import json
import os
import sys

import deltatx
from deltatx import DeltaTable
from deltatx.spark.arrow_files import spark_reaches
from deltatx.storage.location import Location

if __name__ == "__main__":
    jars_dir, table = sys.argv[1:3]
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    spark = deltatx.spark_session(
        config={
            "spark.jars": ",".join(sorted(glob.glob(os.path.join(jars_dir, "*.jar")))),
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.endpoint.region": os.environ["AWS_REGION"],
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": os.environ["AWS_ACCESS_KEY_ID"],
            "spark.hadoop.fs.s3a.secret.key": os.environ["AWS_SECRET_ACCESS_KEY"],
        }
    )
    reaches = spark_reaches(spark, Location.of(table))
    df = spark.createDataFrame([(i, f"p{i % 2}") for i in range(10)], "id BIGINT, p STRING")
    deltatx.write(df, table, partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    dt = DeltaTable.for_path(spark, table)
    dt.delete("id < 4 AND id != 2")
    dt.delete("id = 2")
    frame = dt.to_df()
    # The deletion vectors are read from s3a:// by the tasks, through the reader extension.
    plan = frame._jdf.queryExecution().executedPlan().toString()
    rows = sorted(r["id"] for r in frame.collect())
    vectors = sum(f.deletion_vector is not None for f in dt.snapshot().add_files())
    print(
        json.dumps(
            {
                "reaches": reaches,
                "rows": rows,
                "version": dt.version(),
                "vectors": vectors,
                "extension": "Parquet with deletion vectors" in plan,
            }
        )
    )
    spark.stop()
