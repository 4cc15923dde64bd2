"""Finding delta-spark and talking to it: one driver process per caller, JSON lines over pipes.

delta-spark 4.4's jars are built for Spark 4.2, deltatx runs on Spark 4.3: delta-spark runs in
its own environment (``.venv-peer``, built by ``make peer-venv``) as ``driver.py``, a long-lived
subprocess, so the JVM starts once per test module rather than once per test.

The jars are looked for in ``$DELTATX_DELTA_SPARK_JARS`` (the vendor folder or its ``jars/``),
else in ``../shared/vendor/delta-spark`` beside the repository.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
JARS_ENV = "DELTATX_DELTA_SPARK_JARS"
PYTHON_ENV = "DELTATX_PEER_PYTHON"
DRIVER = Path(__file__).with_name("driver.py")


def jars_dir() -> Path | None:
    """The folder holding delta-spark's jars, or None when they are not on this machine."""
    named = os.environ.get(JARS_ENV)
    candidates = [Path(named)] if named else [ROOT.parent / "shared" / "vendor" / "delta-spark"]
    for base in candidates:
        for folder in (base / "jars", base):
            if glob.glob(str(folder / "delta-spark_*.jar")):
                return folder
    return None


def peer_python() -> Path | None:
    """The peer environment's interpreter, or None when it has not been built."""
    named = os.environ.get(PYTHON_ENV)
    python = Path(named) if named else ROOT / ".venv-peer" / "bin" / "python"
    return python if python.exists() else None


def missing_reason() -> str | None:
    """One line saying why delta-spark cannot run here, or None when it can."""
    if jars_dir() is None:
        return (
            f"delta-spark jars not found (set {JARS_ENV} or put them in "
            "../shared/vendor/delta-spark)"
        )
    if peer_python() is None:
        return "delta-spark peer environment missing: run `make peer-venv`"
    return None


class PeerError(RuntimeError):
    """The driver reported an error for a request that was expected to succeed."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(
            f"{answer.get('error')}: {answer.get('message')}\n{answer.get('trace', '')}"
        )
        self.answer = answer


class DeltaSpark:
    """A delta-spark session in its own process."""

    def __init__(
        self,
        *,
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        jars, python = jars_dir(), peer_python()
        if jars is None or python is None:
            raise RuntimeError(missing_reason())
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("SPARK_HOME", None)
        env["PYSPARK_PYTHON"] = str(python)
        self._stderr = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(python), str(DRIVER), str(jars), master, json.dumps(conf or {})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )
        self._lock = threading.Lock()
        hello = self._read()
        if not hello.get("ready"):
            raise PeerError(hello)
        self.spark_version = str(hello["pyspark"])

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the delta-spark driver exited (status {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Sends one request and returns the driver's answer as it is."""
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
            return self._read()

    def try_exec(self, code: str, **args: Any) -> dict[str, Any]:
        """Runs ``code`` in the driver; the answer, success or not."""
        return self.request("exec", code=code, args=args)

    def exec(self, code: str, **args: Any) -> Any:
        """Runs ``code`` in the driver and returns its ``result``; raises PeerError on failure."""
        answer = self.try_exec(code, **args)
        if not answer["ok"]:
            raise PeerError(answer)
        return answer["result"]

    def sql(self, statement: str) -> list[dict[str, Any]]:
        """Runs one SQL statement; its rows as dicts."""
        rows: list[dict[str, Any]] = self.exec(
            "result = spark.sql(args['s']).collect()", s=statement
        )
        return rows

    def rows(self, path: str, version: int | None = None) -> list[dict[str, Any]]:
        """Every row of the table at ``version`` (latest if None), in a stable order."""
        rows: list[dict[str, Any]] = self.exec(
            "r = spark.read.format('delta')\n"
            "if args['v'] is not None: r = r.option('versionAsOf', args['v'])\n"
            "result = [x.asDict() for x in r.load(args['p']).collect()]",
            p=path,
            v=version,
        )
        return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))

    def version(self, path: str) -> int:
        """The table's latest version as delta-spark sees it."""
        return int(
            self.exec(
                "result = DeltaTable.forPath(spark, args['p']).history(1).collect()[0]['version']",
                p=path,
            )
        )

    @contextmanager
    def held(self, code: str, *, hold: bool = True, **args: Any) -> Iterator[dict[str, Any]]:
        """Runs ``code`` in the driver while the caller acts; its outcome is filled in on exit.

        With ``hold`` the statement first pins its snapshot and then waits for an executor core
        that is taken until the block ends: what the caller commits inside the block lands after
        the statement read the table and before it commits.
        """
        key = os.urandom(6).hex()
        outcome: dict[str, Any] = {}
        started = self.request("start", id=key, code=code, args=args, hold=hold)
        if not started["ok"]:
            raise PeerError(started)
        try:
            ready = self.request("started", id=key)
            if not ready["ok"]:
                raise PeerError(ready)
            yield outcome
        finally:
            self.request("release")
            outcome.update(self.request("join", id=key))

    def close(self) -> None:
        """Stops the driver (and its JVM)."""
        if self.proc.poll() is None:
            try:
                self.request("quit")
                self.proc.wait(60)
            except Exception:
                self.proc.kill()
        if self._stderr is not subprocess.DEVNULL:
            self._stderr.close()


def main() -> int:
    """``python -m tests.peer.engine``: prints where delta-spark is, or why it is not."""
    reason = missing_reason()
    print(reason or f"delta-spark jars: {jars_dir()}; peer python: {peer_python()}")
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main())
