"""The local filesystem LogStore.

Write-if-absent fills a file that has no name yet, fsyncs it, then links it to the target name:
the link fails if the target exists, which is the atomic exclusion, and a reader can never
observe a half-written commit. The directory is fsynced so the new name survives a crash.

On Linux the unnamed file is an ``O_TMPFILE`` opened in the target's directory and linked by its
``/proc/self/fd`` entry: four system calls (open, write, link, close), and a crash leaves
nothing behind. Where the kernel, the file system or ``/proc`` cannot do that, and for
overwrites, the file is a hidden temporary name next to the target, linked (or renamed) into
place and then unlinked.

Opening the unnamed file is where a file system spends most of a commit's time when it
allocates inodes slowly: ext4 without a journal passes over every inode freed in the last
minutes, so after a VACUUM or a dropped table one open can take a millisecond. So once a
commit is linked, the next unnamed file in that directory is opened on a background thread,
and the next commit there only writes and links it (as a database prepares its next log
segment). At most :data:`SPARES_AT_MOST` such files are open per process; a spare is never
used by another process (a forked child opens its own), and the kernel frees it with the
process. Where opening is fast, handing the work to another thread and back costs a commit
more than the open itself, so a directory gets files opened ahead only while its opens take
longer than :data:`OPEN_AHEAD_ABOVE_S`: each commit that opens its own file is timed, and while
files are opened ahead one commit in :data:`PROBE_EVERY` opens its own to time it again.

Paths are canonical local paths (see :class:`deltatx.storage.location.Location`, which turns
table URIs and log paths into them).
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from deltatx.storage.faults import fault_point, faults_armed
from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC
_TMPFILE = getattr(os, "O_TMPFILE", 0)
# What open(O_TMPFILE) answers on a kernel or file system without unnamed files.
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL})
# What linking a /proc/self/fd entry answers where /proc or the file system does not allow it.
_NO_LINK_BY_FD = frozenset(
    {errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}
)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _fill(fd: int, data: bytes, *, fsync: bool) -> None:
    view = memoryview(data)
    # A crash test armed at the partial-write point needs a truly half-written file on disk;
    # otherwise the whole file goes in one call.
    half = len(view) // 2 if faults_armed() else len(view)
    _write_all(fd, view[:half])
    fault_point("log_store.partial_write")
    _write_all(fd, view[half:])
    if fsync:
        os.fsync(fd)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create(path: str, directory: str) -> int:
    """Opens a new file at ``path`` for writing, making ``directory`` first if it is missing.

    Raises:
        FileExistsError: Something is already at ``path``.
    """
    try:
        return os.open(path, _CREATE, 0o666)
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        return os.open(path, _CREATE, 0o666)


_syncer: tuple[int, ThreadPoolExecutor] | None = None
_syncer_lock = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    """One background thread for directory fsyncs, made again in a forked child."""
    global _syncer
    with _syncer_lock:
        if _syncer is None or _syncer[0] != os.getpid():
            _syncer = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="deltatx-fsync"))
        return _syncer[1]


def _open_tmpfile(directory: str) -> int:
    return os.open(directory, _TMPFILE | os.O_WRONLY | _CLOEXEC, 0o666)


SPARES_AT_MOST = 8


class _OpenAhead:
    """The thread that opens unnamed files ahead of commits: one per process, made on need.

    A commit hands it a request through a queue and never waits for it; the file it opens
    is found by a later commit in the same directory, if it is ready by then. A future per
    request, as an executor makes, cost a commit tens of microseconds.
    """

    __slots__ = ("requests",)

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="deltatx-open-ahead", daemon=True).start()

    def _serve(self) -> None:
        while True:
            request = self.requests.get()
            # A request that fails leaves the next commit to open its own file.
            with contextlib.suppress(Exception):
                request()


_opener: _OpenAhead | None = None
_opener_lock = threading.Lock()


def _open_ahead_thread() -> _OpenAhead:
    """This process's open-ahead thread.

    Raises:
        RuntimeError: The interpreter is shutting down and starts no thread.
    """
    global _opener
    opener = _opener
    if opener is None:
        with _opener_lock:
            if _opener is None:
                _opener = _OpenAhead()
            opener = _opener
    return opener


# Per directory, the next unnamed file, opened there ahead by the open-ahead thread.
_spares: OrderedDict[str, int] = OrderedDict()
# Directories with a request queued and not yet started: one is enough, however many commits
# pass meanwhile, so the queue stays as short as the number of directories.
_asked: set[str] = set()
_spares_lock = threading.Lock()


def _take_spare(directory: str) -> int | None:
    """The unnamed file opened ahead in ``directory`` by this process, if one is ready."""
    with _spares_lock:
        return _spares.pop(directory, None)


def _open_spare(directory: str) -> None:
    """On the open-ahead thread: opens the next unnamed file in ``directory`` and keeps it.

    Beyond :data:`SPARES_AT_MOST`, the file of the directory least recently written is closed;
    so is an earlier file of the same directory (two threads committing there).
    """
    with _spares_lock:
        _asked.discard(directory)
    fd = _open_tmpfile(directory)
    with _spares_lock:
        replaced = _spares.pop(directory, None)
        _spares[directory] = fd
        closing = [_spares.popitem(last=False)[1] for _ in range(len(_spares) - SPARES_AT_MOST)]
    if replaced is not None:
        closing.append(replaced)
    for old in closing:
        # The kernel frees an unnamed file with its last descriptor.
        os.close(old)


# A directory gets its files opened ahead while opening one there takes longer than this: the
# hand-over to the background thread and back costs a commit tens of microseconds.
OPEN_AHEAD_ABOVE_S = 100e-6
# While files are opened ahead in a directory, one commit in this many opens its own (timed).
PROBE_EVERY = 16
_COSTS_AT_MOST = 64


class _OpenCost:
    """How long opening an unnamed file took in one directory, on average of recent opens."""

    __slots__ = ("average", "since_probe")

    def __init__(self, seconds: float) -> None:
        self.average = seconds
        self.since_probe = 0


# Per directory (the most recently written), what opening there costs.
_open_costs: OrderedDict[str, _OpenCost] = OrderedDict()
_costs_lock = threading.Lock()


def _note_open(directory: str, seconds: float) -> None:
    """Records an open timed in ``directory``; recent opens count as much as all before."""
    with _costs_lock:
        cost = _open_costs.get(directory)
        if cost is None:
            _open_costs[directory] = _OpenCost(seconds)
            if len(_open_costs) > _COSTS_AT_MOST:
                _open_costs.popitem(last=False)
        else:
            cost.average = (cost.average + seconds) / 2
            _open_costs.move_to_end(directory)


def _worth_opening_ahead(directory: str) -> bool:
    """Whether the next commit in ``directory`` should find its file opened ahead."""
    with _costs_lock:
        cost = _open_costs.get(directory)
        if cost is None or cost.average <= OPEN_AHEAD_ABOVE_S:
            return False
        cost.since_probe += 1
        if cost.since_probe >= PROBE_EVERY:
            cost.since_probe = 0
            return False  # the next commit opens its own, timed
        return True


def _prepare_spare(directory: str) -> None:
    """Asks the open-ahead thread for the next unnamed file in ``directory``.

    Called once a commit is linked, so it never fails: at interpreter exit nothing is opened.
    """
    try:
        opener = _open_ahead_thread()
    except RuntimeError:  # the interpreter is shutting down and starts no thread
        return
    with _spares_lock:
        if directory in _asked:
            return
        _asked.add(directory)
    opener.requests.put(partial(_open_spare, directory))


def _forget_spares() -> None:
    # In a forked child the parent's spares are not this process's to link: the same inode
    # would become two commits. Their descriptors close with the child (they are CLOEXEC).
    global _spares_lock, _costs_lock, _opener, _opener_lock
    _spares.clear()
    _asked.clear()
    _spares_lock = threading.Lock()
    # The parent's open-ahead thread does not exist here; the child makes its own on need.
    _opener = None
    _opener_lock = threading.Lock()
    # A lock held by another thread at the fork would stay held in the child for good.
    _costs_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_spares)


class LocalLogStore:
    """LogStore over the local filesystem (or a POSIX mount)."""

    def __init__(self, *, fsync: bool = True, open_ahead: bool = True) -> None:
        """Creates a store.

        Args:
            fsync: False trades durability for speed (tests, benchmarks).
            open_ahead: Whether a commit's unnamed file is opened on a background thread after
                the previous commit in its directory, where opening there is slow (one
                descriptor kept per directory, at most :data:`SPARES_AT_MOST` in the process).
        """
        self._fsync = fsync
        self._open_ahead = open_ahead
        # Cleared for good the first time a directory refuses unnamed files or their linking.
        self._unnamed = bool(_TMPFILE) and os.path.isdir("/proc/self/fd")

    def read(self, path: str) -> bytes:
        """The whole file; ``FileNotFoundError`` if absent."""
        with open(path, "rb") as f:
            return f.read()

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes a whole file atomically; without ``overwrite`` only if it is absent."""
        directory = os.path.dirname(path) or "."
        if not overwrite and self._unnamed and self._write_unnamed(path, directory, data):
            return
        self._write_named(path, directory, data, overwrite=overwrite)

    def write_new(self, path: str, data: bytes) -> None:
        """Writes a file under a fresh name that nothing refers to yet, durably on return.

        For files a later commit publishes (deletion vectors): until then no reader looks for
        the name, and a crash half-way leaves an unreferenced file, which VACUUM removes. So
        the file is written in place, and its data and its directory entry are synced at the
        same time: two concurrent fsyncs cost about one, two in a row cost two.

        Raises:
            FileAlreadyExistsError: Something is already at ``path``.
        """
        directory = os.path.dirname(path) or "."
        try:
            fd = _create(path, directory)
        except FileExistsError:
            raise FileAlreadyExistsError(path) from None
        try:
            _fill(fd, data, fsync=False)
            fault_point("log_store.after_link")
            if self._fsync:
                entry = _sync_pool().submit(_fsync_dir, directory)
                try:
                    os.fsync(fd)
                finally:
                    entry.result()
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        finally:
            os.close(fd)

    def _write_unnamed(self, path: str, directory: str, data: bytes) -> bool:
        """Write-if-absent through an unnamed file; False where this system cannot link one."""
        fd = _take_spare(directory) if self._open_ahead else None
        spare = fd is not None
        if fd is None:
            fd = self._open_unnamed(directory)
            if fd is None:
                return False
        try:
            _fill(fd, data, fsync=self._fsync)
            try:
                # An absolute source makes linkat ignore src_dir_fd; passing one is what makes
                # os.link call linkat with AT_SYMLINK_FOLLOW, which links the file the /proc
                # entry points at rather than the entry itself.
                os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
            except FileExistsError:
                raise FileAlreadyExistsError(path) from None
            except OSError as exc:
                if exc.errno not in _NO_LINK_BY_FD:
                    raise
                # Nothing was published: the unnamed file goes with its descriptor. A spare
                # whose directory has gone since proves nothing about the file system.
                if not (spare and exc.errno == errno.ENOENT):
                    self._unnamed = False
                return False
        finally:
            os.close(fd)
        self._after_link(directory)
        if self._open_ahead and _worth_opening_ahead(directory):
            _prepare_spare(directory)
        return True

    def _open_unnamed(self, directory: str) -> int | None:
        """An unnamed file in ``directory``, or None where the file system has none."""
        try:
            try:
                started = time.perf_counter()
                fd = _open_tmpfile(directory)
            except FileNotFoundError:
                # The directory is created on first need: a commit then costs no extra calls.
                os.makedirs(directory, exist_ok=True)
                return _open_tmpfile(directory)
            if self._open_ahead:
                _note_open(directory, time.perf_counter() - started)
            return fd
        except OSError as exc:
            if exc.errno not in _NO_TMPFILE:
                raise
            self._unnamed = False
            return None

    def _write_named(self, path: str, directory: str, data: bytes, *, overwrite: bool) -> None:
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(8).hex()}.tmp")
        try:
            fd = _create(tmp, directory)
            try:
                _fill(fd, data, fsync=self._fsync)
            finally:
                os.close(fd)
            if overwrite:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise FileAlreadyExistsError(path) from None
            self._after_link(directory)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _after_link(self, directory: str) -> None:
        fault_point("log_store.after_link")
        if self._fsync:
            _fsync_dir(directory)

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Files directly in ``directory`` sorted by name, from ``start_name`` on."""
        out: list[FileStatus] = []
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
            return []
        with entries:
            for entry in entries:
                if entry.name < start_name or entry.name.startswith("."):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                out.append(
                    FileStatus(
                        path=os.path.join(directory, entry.name),
                        size=st.st_size,
                        modification_time=st.st_mtime_ns // 1_000_000,
                    )
                )
        out.sort(key=lambda s: s.name)
        return out

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        return os.path.exists(path)

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every regular file under ``root``; symbolic links are neither followed nor listed.

        A link could lead VACUUM to delete, or a reader to trust, a file outside the table.
        """
        for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield FileStatus(full, st.st_size, st.st_mtime_ns // 1_000_000)

    def delete(self, path: str) -> None:
        """Removes a file; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
