"""A table's place on storage, resolved once from the URI the user gave.

A :class:`Location` joins the three things every layer needs to touch a table's files: the
canonical root (see :mod:`deltatx.kernel.file_paths`), the :class:`LogStore` whose
write-if-absent is the commit primitive, and the pyarrow filesystem for bulk data I/O
(Parquet footers, moving freshly written files). Nothing outside the storage layer spells
``file:``, decodes a path or calls ``os`` on a table file: it asks the Location.

The local filesystem and S3 (``s3://``, ``s3a://``; see :mod:`deltatx.storage.s3`) are built.
Another object store with conditional writes slots in as another :class:`LogStore` and
filesystem chosen in :meth:`Location.of`; every other URI scheme is refused by name there,
before anything is written.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs

from deltatx.errors import InvalidArgumentError, InvalidTableError, UnsupportedFeatureError
from deltatx.kernel.file_paths import (
    file_key,
    is_relative,
    relative_to,
    resolve,
    scheme_of,
    table_root,
)
from deltatx.kernel.log_paths import LOG_DIR
from deltatx.storage.local import LocalLogStore
from deltatx.storage.log_store import FileStatus, LogStore


@dataclass(frozen=True, slots=True)
class Location:
    """Where a table lives: its root, the store holding it, and a filesystem for data I/O.

    Attributes:
        root: The canonical table root (an absolute POSIX path for a local table).
        store: The storage of the log and the table's files; its write-if-absent is atomic.
        fs: The pyarrow filesystem for reading and moving data files.
    """

    root: str
    store: LogStore
    fs: pafs.FileSystem

    @classmethod
    def of(cls, uri: str, *, store: LogStore | None = None, fsync: bool = True) -> Location:
        """Resolves a table URI: a local path, a ``file:`` URI, or an ``s3://`` (``s3a://``) URI.

        Args:
            uri: The table root as the user gave it.
            store: The store to use instead of the local filesystem's (tests, overlays).
            fsync: Whether a local table's commits and deletion-vector files are synced to
                disk before they count as written; False trades crash durability for speed
                (an object store's writes are durable either way).

        Raises:
            UnsupportedFeatureError: The URI names a store deltatx cannot use yet
                (``s3://``, ``gs://``, ``abfss://``, ``hdfs://``, ...).
            InvalidArgumentError: The path is empty or the URI is malformed.
        """
        root = table_root(uri)
        if scheme_of(root) == "s3":
            # botocore takes a fifth of a second to import: local tables never pay for it.
            from deltatx.storage.s3 import S3LogStore, shared_client_and_filesystem

            fs = shared_client_and_filesystem()[1]
            return cls(root, store if store is not None else S3LogStore(), fs)
        local = store if store is not None else LocalLogStore(fsync=fsync)
        return cls(root, local, pafs.LocalFileSystem())

    @property
    def on_object_store(self) -> bool:
        """Whether the table lives on an object store (S3) rather than a filesystem."""
        return scheme_of(self.root) is not None

    def fs_path(self, location: str) -> str:
        """The path of a canonical location within :attr:`fs` (``bucket/key`` on S3)."""
        return location.split("://", 1)[1] if self.on_object_store else location

    def with_store(self, store: LogStore) -> Location:
        """The same root over another store (an overlay that keeps writes in memory)."""
        return Location(self.root, store, self.fs)

    @property
    def uri(self) -> str:
        """The root as a URI (``file://...`` or ``s3://...``)."""
        return self.root if self.on_object_store else "file://" + self.root

    @property
    def log_dir(self) -> str:
        """The ``_delta_log`` directory."""
        return f"{self.root.rstrip('/')}/{LOG_DIR}"

    def child(self, relative: str) -> str:
        """The location of an on-disk (decoded) path relative to the root."""
        return f"{self.root.rstrip('/')}/{relative}"

    # -- paths found in the log --------------------------------------------------------------

    def file(self, path: str, *, what: str = "file") -> str:
        """The canonical location of a file path found in the log.

        Relative paths (percent-encoded) must resolve inside the root; absolute paths and
        ``file:`` URIs may point anywhere on the local filesystem, as the protocol allows (and
        ``s3://`` URIs anywhere on S3, for a table on S3).

        Args:
            path: The path as the log has it.
            what: What names it, for the message (``data file``, ``deletion vector``).

        Raises:
            InvalidTableError: A relative path climbs out of the root, or a ``file:`` URI is
                malformed.
            UnsupportedFeatureError: The path is a URI of a store deltatx cannot read.
        """
        try:
            location = resolve(path, root=self.root)
        except InvalidArgumentError as exc:
            raise InvalidTableError(f"{what} {path!r}: {exc}") from None
        if is_relative(path):
            if relative_to(location, root=self.root) is None:
                raise InvalidTableError(
                    f"{what} {path!r} resolves to {location}, outside the table root "
                    f"{self.root}; a relative path must stay inside the table"
                )
        elif self.on_object_store and scheme_of(location) is None:
            raise UnsupportedFeatureError(
                f"{what} {path!r} is on the local filesystem, which a table on "
                f"{self.root} cannot read from",
                feature="storage:file",
            )
        elif (scheme := scheme_of(location)) is not None and scheme != scheme_of(self.root):
            raise UnsupportedFeatureError(
                f"{what} {path!r} is on {scheme}:// storage, which deltatx cannot read yet",
                feature=f"storage:{scheme}",
            )
        return location

    def refuse_links_out(self, locations: Iterable[str], *, what: str) -> None:
        """Refuses files under the root whose directory a symbolic link leads out of the root.

        The log names such a file by a path inside the table, yet reading or writing it would
        touch another directory: a crafted link must not make a table read or overwrite
        foreign files. Files the log names by an absolute path elsewhere are not concerned
        (the protocol allows them). Each directory is resolved once.

        Raises:
            InvalidTableError: A directory leads out of the root; the message names both.
        """
        if not isinstance(self.fs, pafs.LocalFileSystem):
            return
        real_root = os.path.realpath(self.root)
        inside = real_root.rstrip("/") + "/"
        parents = {posixpath.dirname(loc) for loc in locations if self.relative(loc) is not None}
        for parent in sorted(parents):
            real = os.path.realpath(parent)
            if real != real_root and not real.startswith(inside):
                raise InvalidTableError(
                    f"{what} directory {parent} leads to {real}, outside the table root "
                    f"{self.root} (a symbolic link); refusing to go through it"
                )

    def key(self, path: str) -> str:
        """The one key of the file a log path names (see :func:`file_key`)."""
        return file_key(path, root=self.root)

    def relative(self, location: str) -> str | None:
        """A canonical location's path below the root, or None when it is not below it."""
        return relative_to(location, root=self.root)

    # -- I/O ---------------------------------------------------------------------------------

    def read(self, location: str) -> bytes:
        """A whole file.

        Raises:
            FileNotFoundError: There is no file there.
            IsADirectoryError: It is a directory.
        """
        return self.store.read(location)

    def write_if_absent(self, location: str, data: bytes) -> None:
        """Writes a whole file atomically, only if nothing is there: the commit primitive.

        Raises:
            FileAlreadyExistsError: Another writer got there first.
        """
        self.store.write(location, data, overwrite=False)

    def write_new(self, location: str, data: bytes) -> None:
        """Writes a file under a fresh unique name that no commit names yet (a DV file).

        Durable on return, like :meth:`write_if_absent`, but not published atomically: only
        a later commit makes the file visible, so the local store may write it in place.

        Raises:
            FileAlreadyExistsError: Something is already at ``location``.
        """
        if isinstance(self.store, LocalLogStore):
            self.store.write_new(location, data)
        else:
            self.store.write(location, data, overwrite=False)

    def overwrite(self, location: str, data: bytes) -> None:
        """Writes a whole file atomically, replacing what is there."""
        self.store.write(location, data, overwrite=True)

    def exists(self, location: str) -> bool:
        """Whether a file (or directory) exists at ``location``."""
        return self.store.exists(location)

    def list_dir(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """The files directly in ``directory`` from ``start_name`` on, by name."""
        return self.store.list_from(directory, start_name)

    def walk(self) -> Iterator[FileStatus]:
        """Every regular file under the root (symbolic links are not followed or listed)."""
        return self.store.walk(self.root)

    def delete(self, location: str) -> None:
        """Removes a file; a missing file is not an error."""
        self.store.delete(location)
