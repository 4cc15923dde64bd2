"""Writer processes shared by the stress tests: each keeps its Spark session between runs."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


class WriterServer:
    """One writer_server.py process: ``submit`` starts a run, ``result`` waits for its end."""

    def __init__(self, folder: Path, n: int) -> None:
        self.job = ""
        self.ready = folder / f"server{n}.ready"
        self.log = folder / f"server{n}.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "writer_server.py"), str(self.ready)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put("")  # the process ended

    def tail(self) -> str:
        """The end of the process's stderr (Spark's log and any traceback)."""
        return self.log.read_text(errors="replace")[-3000:]

    def submit(self, **job: Any) -> None:
        """Starts one run; the process begins it as soon as it reads the line."""
        assert self.proc.stdin is not None
        self.job = uuid.uuid4().hex
        self.proc.stdin.write(json.dumps({**job, "id": self.job}) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> None:
        """Waits for the submitted run to end; fails the test with its traceback if it failed."""
        deadline = time.monotonic() + timeout
        while True:  # a run a failed test left behind answers first: skip it
            try:
                line = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"a writer run did not end in time: {self.tail()}") from None
            assert line, f"a writer process ended early: {self.tail()}"
            answer = json.loads(line)
            if answer["id"] == self.job:
                break
        assert answer["ok"], answer["error"]

    def close(self) -> None:
        """Ends the process (its session stops when stdin closes)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WriterServers:
    """A pool of writer processes, started on first use and kept for the pytest session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.servers: list[WriterServer] = []

    def get(self, n: int) -> list[WriterServer]:
        """``n`` writer processes, each with its session up (waits up to 10 minutes)."""
        while len(self.servers) < n:
            self.servers.append(WriterServer(self.folder, len(self.servers)))
        chosen = self.servers[:n]
        deadline = time.monotonic() + 600
        while not all(s.ready.exists() for s in chosen):
            for s in chosen:
                assert s.proc.poll() is None, f"a writer process ended early: {s.tail()}"
            assert time.monotonic() < deadline, "the writer processes did not start a session"
            time.sleep(0.1)
        return chosen

    def close(self) -> None:
        """Ends every process."""
        for s in self.servers:
            s.close()
