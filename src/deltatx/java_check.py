"""Is there a Java runtime for Spark? Runnable as ``python -m deltatx.java_check``.

This module must not import pyspark: it is the check that runs before a JVM is started, and
the command form lets install scripts and CI fail early with one readable line.
"""

from __future__ import annotations

import os
import shutil
import sys

JAVA_REQUIRED_MESSAGE = (
    "deltatx needs Java 17 or newer to run Spark, but no 'java' was found in JAVA_HOME or on "
    "PATH: install one (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME to a "
    "Java 17+ installation."
)


def find_java() -> str | None:
    """The ``java`` executable Spark will launch, or None when there is none.

    Spark's launcher prefers ``$JAVA_HOME/bin/java`` and falls back to ``java`` on ``PATH``;
    this follows the same order so the answer matches what Spark will do.
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def main() -> int:
    """Prints the requirement to stderr and returns 1 when Java is missing, else returns 0."""
    if find_java() is None:
        print(JAVA_REQUIRED_MESSAGE, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
