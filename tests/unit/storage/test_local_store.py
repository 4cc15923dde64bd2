"""The local store's own behaviour: unnamed files where Linux has them, hidden names elsewhere."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deltatx.storage import LocalLogStore, local
from deltatx.storage.log_store import FileAlreadyExistsError

needs_tmpfile = pytest.mark.skipif(
    not getattr(os, "O_TMPFILE", 0) or not os.path.isdir("/proc/self/fd"),
    reason="the kernel has no unnamed files (O_TMPFILE) or /proc is not mounted",
)


def _spy(monkeypatch: pytest.MonkeyPatch, name: str, calls: list[Any]) -> Callable[..., Any]:
    real = getattr(os, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, spy)
    return real


@needs_tmpfile
def test_write_if_absent_links_an_unnamed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Any] = []
    linked: list[Any] = []
    _spy(monkeypatch, "open", opened)
    _spy(monkeypatch, "link", linked)
    store = LocalLogStore(fsync=True)
    log = tmp_path / "_delta_log"
    store.write(f"{log}/00000000000000000000.json", b"first\n")
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{log}/00000000000000000000.json", b"second\n")
    assert (log / "00000000000000000000.json").read_bytes() == b"first\n"
    assert opened[0][1] & os.O_TMPFILE == os.O_TMPFILE
    assert not any(str(args[0]).endswith(".tmp") for args in opened)
    assert [str(src).startswith("/proc/self/fd/") for src, _ in linked] == [True, True]
    assert os.listdir(log) == ["00000000000000000000.json"]


@pytest.mark.parametrize("unnamed", [True, False])
def test_no_temporary_name_is_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool
) -> None:
    if not unnamed:
        monkeypatch.setattr(local, "_TMPFILE", 0)
    store = LocalLogStore(fsync=False)
    store.write(f"{tmp_path}/a.json", b"a")
    store.write(f"{tmp_path}/_last_checkpoint", b"1", overwrite=True)
    store.write(f"{tmp_path}/_last_checkpoint", b"2", overwrite=True)
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{tmp_path}/a.json", b"b")
    assert sorted(os.listdir(tmp_path)) == ["_last_checkpoint", "a.json"]
    assert (tmp_path / "_last_checkpoint").read_bytes() == b"2"


@needs_tmpfile
def test_a_file_system_without_unnamed_files_falls_back_to_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open
    refused: list[str] = []

    def no_tmpfile(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            refused.append(path)
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_tmpfile)
    store = LocalLogStore(fsync=True)
    store.write(f"{tmp_path}/log/0.json", b"zero")
    store.write(f"{tmp_path}/log/1.json", b"one")
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{tmp_path}/log/1.json", b"again")
    assert refused == [f"{tmp_path}/log"]  # asked once, then the store stops asking
    assert sorted(os.listdir(tmp_path / "log")) == ["0.json", "1.json"]
    assert (tmp_path / "log" / "1.json").read_bytes() == b"one"


@needs_tmpfile
def test_a_system_that_cannot_link_a_proc_entry_falls_back_to_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link
    refused: list[str] = []

    def no_proc(src: str, dst: str, **kwargs: Any) -> None:
        if str(src).startswith("/proc/"):
            refused.append(dst)
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), src)
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", no_proc)
    store = LocalLogStore(fsync=False)
    store.write(f"{tmp_path}/0.json", b"zero")
    store.write(f"{tmp_path}/1.json", b"one")
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{tmp_path}/1.json", b"again")
    assert refused == [f"{tmp_path}/0.json"]
    assert sorted(os.listdir(tmp_path)) == ["0.json", "1.json"]
    assert (tmp_path / "0.json").read_bytes() == b"zero"


def test_other_errors_of_the_unnamed_open_are_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def read_only(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(OSError) as raised:
        LocalLogStore().write(f"{tmp_path}/0.json", b"x")
    assert raised.value.errno == errno.EROFS
    assert os.listdir(tmp_path) == []


_CRASH = """
import sys
from deltatx.storage import LocalLogStore, local
if sys.argv[2] == "named":
    local._TMPFILE = 0
LocalLogStore().write(sys.argv[1] + "/00000000000000000000.json", b"x" * 100_000)
"""


@pytest.mark.parametrize("unnamed", [True, False])
def test_a_crash_half_way_never_publishes_the_file(tmp_path: Path, unnamed: bool) -> None:
    env = {**os.environ, "DELTATX_FAULT": "log_store.partial_write"}
    mode = "unnamed" if unnamed else "named"
    run = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path), mode], env=env, check=False)
    assert run.returncode == -signal.SIGKILL
    left = os.listdir(tmp_path)
    assert "00000000000000000000.json" not in left
    if unnamed and local._TMPFILE:
        assert left == []  # the unnamed file died with the process
    else:
        [tmp] = left
        assert tmp.startswith(".00000000000000000000.json.")
        assert os.path.getsize(tmp_path / tmp) == 50_000


@pytest.fixture
def slow_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every open counts as slow, so every directory gets its files opened ahead."""
    monkeypatch.setattr(local, "OPEN_AHEAD_ABOVE_S", -1.0)


def _unnamed_files_open_in(directory: Path) -> int:
    """How many unnamed files this process holds open in ``directory``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(f"{directory}/#") and target.endswith("(deleted)"):
                count += 1
    return count


def _settled() -> None:
    """Waits for the open-ahead thread to finish opening the files asked of it."""
    done = threading.Event()
    local._open_ahead_thread().requests.put(done.set)
    assert done.wait(30)


@contextlib.contextmanager
def _thread_held() -> Iterator[local._OpenAhead]:
    """Keeps the open-ahead thread busy: what is asked of it meanwhile waits in its queue."""
    opener = local._open_ahead_thread()
    release, held = threading.Event(), threading.Event()
    opener.requests.put(lambda: (held.set(), release.wait(30)))
    assert held.wait(10)
    try:
        yield opener
    finally:
        release.set()
    _settled()


@needs_tmpfile
def test_the_next_commit_links_the_file_opened_ahead(tmp_path: Path, slow_opens: None) -> None:
    store = LocalLogStore(fsync=False)
    store.write(f"{tmp_path}/0.json", b"zero")
    _settled()
    assert _unnamed_files_open_in(tmp_path) == 1
    opened: list[Any] = []
    real = os.open
    caller = threading.get_ident()

    def spy(*args: Any, **kwargs: Any) -> int:
        if threading.get_ident() == caller:  # not the background thread's next opening
            opened.append(args)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "open", spy)
        store.write(f"{tmp_path}/1.json", b"one")
    assert opened == []  # the commit itself opened nothing
    _settled()
    assert _unnamed_files_open_in(tmp_path) == 1
    assert (tmp_path / "0.json").read_bytes() == b"zero"
    assert (tmp_path / "1.json").read_bytes() == b"one"
    assert os.stat(tmp_path / "0.json").st_ino != os.stat(tmp_path / "1.json").st_ino
    assert sorted(os.listdir(tmp_path)) == ["0.json", "1.json"]


@needs_tmpfile
def test_a_commit_never_waits_for_a_file_not_yet_opened_ahead(
    tmp_path: Path, slow_opens: None
) -> None:
    store = LocalLogStore(fsync=False)
    with _thread_held():
        store.write(f"{tmp_path}/0.json", b"zero")  # its next file waits in the queue
        done = threading.Event()
        writer = threading.Thread(
            target=lambda: (store.write(f"{tmp_path}/1.json", b"one"), done.set())
        )
        writer.start()
        # The commit opens its own file instead of waiting for the held thread.
        assert done.wait(10)
        writer.join()
    assert (tmp_path / "1.json").read_bytes() == b"one"
    # Commit 1's file opened ahead replaced commit 0's: one file is held.
    assert _unnamed_files_open_in(tmp_path) == 1
    assert sorted(os.listdir(tmp_path)) == ["0.json", "1.json"]


@needs_tmpfile
def test_commits_faster_than_the_thread_queue_one_request_per_directory(
    tmp_path: Path, slow_opens: None
) -> None:
    """A thread that falls behind must not accumulate a request (and an open) per commit."""
    store = LocalLogStore(fsync=False)
    with _thread_held() as opener:
        for version in range(40):
            store.write(f"{tmp_path}/{version}.json", b"%d" % version)
        assert opener.requests.qsize() == 1
    assert _unnamed_files_open_in(tmp_path) == 1
    assert len(os.listdir(tmp_path)) == 40


@needs_tmpfile
def test_files_opened_ahead_are_bounded_and_only_with_open_ahead(
    tmp_path: Path, slow_opens: None
) -> None:
    store = LocalLogStore(fsync=False)
    dirs = [tmp_path / f"t{i}" for i in range(local.SPARES_AT_MOST + 4)]
    for d in dirs:
        d.mkdir()
        store.write(f"{d}/0.json", b"0")
    _settled()
    held = [_unnamed_files_open_in(d) for d in dirs]
    assert held == [0] * 4 + [1] * local.SPARES_AT_MOST  # the least recent were closed
    plain = tmp_path / "plain"
    plain.mkdir()
    LocalLogStore(fsync=False, open_ahead=False).write(f"{plain}/0.json", b"0")
    _settled()
    assert _unnamed_files_open_in(plain) == 0


def _child_writes(store: LocalLogStore, path: str, data: bytes) -> int:
    """Forks a child that writes ``data`` at ``path`` through ``store``, then exits; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            store.write(path, data)
        finally:
            os._exit(0)
    return pid


@needs_tmpfile
def test_a_forked_child_never_links_its_parents_file(tmp_path: Path, slow_opens: None) -> None:
    """Linking the parent's unnamed file would make one inode two commits."""
    store = LocalLogStore(fsync=False)
    store.write(f"{tmp_path}/0.json", b"parent 0")
    _settled()
    os.waitpid(_child_writes(store, f"{tmp_path}/1.json", b"child 1"), 0)
    store.write(f"{tmp_path}/2.json", b"parent 2")
    assert (tmp_path / "1.json").read_bytes() == b"child 1"
    assert (tmp_path / "2.json").read_bytes() == b"parent 2"
    assert os.stat(tmp_path / "1.json").st_ino != os.stat(tmp_path / "2.json").st_ino


@needs_tmpfile
def test_a_file_opened_ahead_in_a_removed_directory_is_not_needed(
    tmp_path: Path, slow_opens: None
) -> None:
    store = LocalLogStore(fsync=False)
    log = tmp_path / "_delta_log"
    store.write(f"{log}/0.json", b"old table")
    _settled()
    for name in os.listdir(log):
        os.unlink(log / name)
    os.rmdir(log)
    store.write(f"{log}/0.json", b"new table")
    store.write(f"{log}/1.json", b"next")
    assert (log / "0.json").read_bytes() == b"new table"
    assert (log / "1.json").read_bytes() == b"next"
    assert sorted(os.listdir(log)) == ["0.json", "1.json"]
    assert store._unnamed  # the file system still links unnamed files


@needs_tmpfile
def test_a_commit_at_interpreter_exit_is_not_failed_by_opening_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_opens: None
) -> None:
    """The commit is linked before the next file is asked for: that request must not fail it."""

    def no_thread() -> local._OpenAhead:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(local, "_opener", None)
    monkeypatch.setattr(local, "_OpenAhead", no_thread)
    LocalLogStore(fsync=False).write(f"{tmp_path}/0.json", b"zero")
    assert (tmp_path / "0.json").read_bytes() == b"zero"
    assert _unnamed_files_open_in(tmp_path) == 0


def _commits_opening_their_own_file(
    store: LocalLogStore, directory: Path, versions: range
) -> list[int]:
    """Writes ``versions`` one after another; the ones whose own thread opened a file."""
    own: list[int] = []
    real = local._open_tmpfile
    caller = threading.get_ident()
    version = -1

    def spy(path: str) -> int:
        if threading.get_ident() == caller:
            own.append(version)
        return real(path)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local, "_open_tmpfile", spy)
        for version in versions:
            store.write(f"{directory}/{version}.json", b"%d" % version)
            _settled()
    return own


@needs_tmpfile
def test_where_opening_is_fast_no_file_is_opened_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "OPEN_AHEAD_ABOVE_S", 10.0)
    store = LocalLogStore(fsync=False)
    assert _commits_opening_their_own_file(store, tmp_path, range(5)) == [0, 1, 2, 3, 4]
    assert _unnamed_files_open_in(tmp_path) == 0


@needs_tmpfile
def test_where_opening_is_slow_files_are_opened_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = local._open_tmpfile

    def slow(directory: str) -> int:
        time.sleep(2 * local.OPEN_AHEAD_ABOVE_S)
        return real(directory)

    monkeypatch.setattr(local, "_open_tmpfile", slow)
    store = LocalLogStore(fsync=False)
    # The first commit times its open; the next ones find theirs opened ahead.
    assert _commits_opening_their_own_file(store, tmp_path, range(5)) == [0]
    assert _unnamed_files_open_in(tmp_path) == 1


@needs_tmpfile
def test_while_files_are_opened_ahead_some_commits_time_their_own_open(
    tmp_path: Path, slow_opens: None
) -> None:
    store = LocalLogStore(fsync=False)
    every = local.PROBE_EVERY
    own = _commits_opening_their_own_file(store, tmp_path, range(2 * every + 1))
    assert own == [0, every, 2 * every]
    assert sorted(os.listdir(tmp_path)) == sorted(f"{v}.json" for v in range(2 * every + 1))


@needs_tmpfile
def test_a_child_forked_while_opens_were_being_timed_still_commits(tmp_path: Path) -> None:
    """The lock around the timings is made afresh in the child: the parent's stays held there."""
    store = LocalLogStore(fsync=False)
    with local._costs_lock:  # as if another thread were recording an open
        pid = _child_writes(store, f"{tmp_path}/0.json", b"child")
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child never committed")
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "0.json").read_bytes() == b"child"
