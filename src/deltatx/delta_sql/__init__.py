"""Delta SQL through :func:`sql`: Delta statements run by deltatx, the rest by Spark.

The package is ``delta_sql`` so that ``deltatx.sql`` stays the function.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from deltatx.delta_sql.execution import execute
from deltatx.delta_sql.parser import parse_statement
from deltatx.reexecution import Backoff
from deltatx.session import spark_session


def sql(
    statement: str,
    *,
    spark: SparkSession | None = None,
    retries: int = 0,
    backoff: Backoff | None = None,
) -> DataFrame:
    """Runs one SQL statement; Delta statements through deltatx, any other through Spark.

    Delta statements (CREATE TABLE ... USING DELTA, INSERT, UPDATE, DELETE, MERGE INTO,
    OPTIMIZE, REORG TABLE, VACUUM, RESTORE, DESCRIBE HISTORY/DETAIL, ALTER TABLE on a Delta
    table, and queries over Delta tables with VERSION/TIMESTAMP AS OF) run with deltatx's
    transactions. A table is ``delta.`/path` `` or a name (Spark's catalog, else the deltatx
    catalog under ``spark.sql.warehouse.dir``). Any other statement is passed to
    ``spark.sql`` unchanged.

    Args:
        statement: One statement (a trailing ``;`` is allowed).
        spark: The session (default: the active one, or a local one).
        retries: For UPDATE, DELETE and MERGE on a Delta table: how many times a conflicting
            statement is re-executed on the latest version when that keeps its meaning
            (deterministic conditions; a MERGE source is read once), as ``dt.update(...,
            retries=N)`` does. Refused for any other statement.
        backoff: The waits between those attempts.

    Returns:
        The statement's result: the query's rows, the command's metrics, or an empty
        DataFrame for DDL.

    Raises:
        SqlError: The statement does not parse; the message says where.
        UnsupportedStatementError: A Delta statement uses a construct deltatx does not run.
        InvalidArgumentError: ``retries``/``backoff`` given for a statement they do not apply
            to.
    """
    session = spark if spark is not None else spark_session()
    return execute(
        session,
        parse_statement(statement),
        statement.strip().rstrip(";").strip(),
        retries=retries,
        backoff=backoff,
    )


__all__ = ["parse_statement", "sql"]
