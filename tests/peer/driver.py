"""delta-spark in its own process: runs the peer suite's commands over stdin/stdout JSON lines.

This script runs in the peer environment (pyspark 4.2 and the vendored delta-spark jars), never
in deltatx's. Each request is one JSON object on a line; each answer is one JSON object on a
line of the protocol stream (the real stdout; everything else Spark or the JVM prints goes to
stderr). Requests:

- ``{"op": "exec", "code": ..., "args": {...}}``: runs Python ``code`` with ``spark``,
  ``DeltaTable`` (delta-spark's), ``F`` and ``args`` in scope; answers ``result``.
- ``{"op": "start", "id": ..., "code": ..., "args": ..., "hold": bool}``: runs ``code`` in a
  thread. With ``hold`` the only executor core is first taken by a job that waits for a release
  file, so the statement pins its snapshot and then waits for a core.
- ``{"op": "started", "id": ...}``: answers once the held statement has submitted a Spark job.
- ``{"op": "release"}``: frees the core. ``{"op": "join", "id": ...}``: the thread's outcome.
- ``{"op": "quit"}``.

An error answers ``{"ok": false, "error": <Delta exception name or Python type>, "message"}``.
"""

from __future__ import annotations

import datetime
import decimal
import glob
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

# Delta error classes (and the exception names delta-spark gives them) that are conflicts.
CONFLICTS = {
    "DELTA_CONCURRENT_APPEND": "ConcurrentAppendException",
    "DELTA_CONCURRENT_DELETE_READ": "ConcurrentDeleteReadException",
    "DELTA_CONCURRENT_DELETE_DELETE": "ConcurrentDeleteDeleteException",
    "DELTA_METADATA_CHANGED": "MetadataChangedException",
    "DELTA_CONCURRENT_TRANSACTION": "ConcurrentTransactionException",
    "DELTA_PROTOCOL_CHANGED": "ProtocolChangedException",
    "DELTA_CONCURRENT_WRITE": "ConcurrentWriteException",
}


def classify(exc: BaseException) -> str:
    """The Delta exception name an error stands for, else its Python type name."""
    text = f"{type(exc).__name__} {exc}"
    for name in CONFLICTS.values():
        if name in text:
            return name
    for error_class, name in CONFLICTS.items():
        if f"[{error_class}" in text:
            return name
    return type(exc).__name__


def plain(value: Any) -> Any:
    """A JSON-friendly copy of ``value`` (Rows become dicts)."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict(recursive=True).items()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date | decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return value


def start_session(jars_dir: str, master: str, conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not jars:
        raise SystemExit(f"no jars in {jars_dir}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("delta-spark-peer")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class Driver:
    def __init__(self, spark: Any, out: Any) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        self.spark = spark
        self.out = out
        self.scope: dict[str, Any] = {"spark": spark, "DeltaTable": DeltaTable, "F": F}
        self.threads: dict[str, threading.Thread] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.release_file = ""
        self.blocker: threading.Thread | None = None

    def answer(self, payload: dict[str, Any]) -> None:
        self.out.write(json.dumps(payload, default=str) + "\n")
        self.out.flush()

    def run_code(self, code: str, args: dict[str, Any]) -> dict[str, Any]:
        scope = dict(self.scope, args=args, result=None)
        try:
            exec(compile(code, "<peer>", "exec"), scope)
        except Exception as exc:  # every failure is an answer, never a dead driver
            return {
                "ok": False,
                "error": classify(exc),
                "message": str(exc)[:4000],
                "trace": traceback.format_exc()[-4000:],
            }
        return {"ok": True, "result": plain(scope.get("result"))}

    def hold_core(self) -> None:
        """Occupies the only executor core until the release file exists."""
        fd, self.release_file = tempfile.mkstemp(prefix="peer-release-")
        os.close(fd)
        os.unlink(self.release_file)
        release, sc = self.release_file, self.spark.sparkContext

        def wait(_: Any) -> int:
            import os as _os
            import time as _time

            while not _os.path.exists(release):
                _time.sleep(0.02)
            return 1

        def run() -> None:
            sc.setJobGroup("peer-hold", "peer-hold")
            sc.parallelize([0], 1).map(wait).count()

        self.blocker = threading.Thread(target=run, daemon=True)
        self.blocker.start()
        # Its task must be running (not just submitted) before anything else queues behind it.
        tracker, deadline = sc.statusTracker(), time.monotonic() + 60
        while not self._task_running(tracker, "peer-hold"):
            if time.monotonic() > deadline:
                raise TimeoutError("the holding job never started")
            time.sleep(0.02)

    @staticmethod
    def _task_running(tracker: Any, group: str) -> bool:
        """Whether a job of ``group`` has a task on an executor core."""
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                stage_info = tracker.getStageInfo(stage)
                if stage_info and stage_info.numActiveTasks > 0:
                    return True
        return False

    def handle(self, req: dict[str, Any]) -> bool:
        op = req["op"]
        if op == "quit":
            self.answer({"ok": True})
            return False
        if op == "exec":
            self.answer(self.run_code(req["code"], req.get("args", {})))
        elif op == "start":
            key = req["id"]
            if req.get("hold"):
                self.hold_core()

            def run() -> None:
                self.spark.sparkContext.setJobGroup(f"peer-{key}", f"peer-{key}")
                self.outcomes[key] = self.run_code(req["code"], req.get("args", {}))

            thread = threading.Thread(target=run, daemon=True)
            self.threads[key] = thread
            thread.start()
            self.answer({"ok": True})
        elif op == "started":
            key, sc = req["id"], self.spark.sparkContext
            deadline = time.monotonic() + float(req.get("timeout", 120))
            while not sc.statusTracker().getJobIdsForGroup(f"peer-{key}"):
                if key in self.outcomes or time.monotonic() > deadline:
                    self.answer(
                        {"ok": False, "error": "NotStarted", "message": str(self.outcomes.get(key))}
                    )
                    return True
                time.sleep(0.02)
            self.answer({"ok": True})
        elif op == "release":
            if self.release_file:
                with open(self.release_file, "w"):
                    pass
            if self.blocker is not None:
                self.blocker.join(60)
                self.blocker = None
            if self.release_file:
                os.unlink(self.release_file)
                self.release_file = ""
            self.answer({"ok": True})
        elif op == "join":
            thread = self.threads.pop(req["id"])
            thread.join(float(req.get("timeout", 600)))
            self.answer(
                self.outcomes.pop(req["id"], {"ok": False, "error": "Timeout", "message": ""})
            )
        else:
            self.answer({"ok": False, "error": "UnknownOp", "message": op})
        return True


def main() -> None:
    jars_dir, master = sys.argv[1], sys.argv[2]
    conf = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    # The protocol owns the real stdout; anything else written to fd 1 lands on stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spark = start_session(jars_dir, master, conf)
    spark.range(1).count()
    driver = Driver(spark, out)
    driver.answer({"ok": True, "ready": True, "pyspark": spark.version})
    for line in sys.stdin:
        if line.strip() and not driver.handle(json.loads(line)):
            break
    spark.stop()


if __name__ == "__main__":
    main()
