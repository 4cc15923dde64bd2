"""Where a path in the log points: the one reading of table roots and file paths.

The protocol lets ``add.path``, ``remove.path``, ``cdc.path`` and a ``p`` deletion vector name
a file three ways: a relative URI (percent-encoded, resolved against the table root), an
absolute path, or an absolute URI such as ``file:///t/a.parquet``. Several spellings of one
file must be one file, during replay and everywhere else, so every layer resolves paths here.

A *canonical location* is either an absolute POSIX path (local files) or ``scheme://rest``
(other stores), normalised, without a trailing ``/``, percent-decoded.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError

# The stores a table may live on today. A scheme is added here when its storage is built.
SUPPORTED_SCHEMES = frozenset({"file", "s3", "s3a"})

# Object stores with conditional writes of their own that a Location is designed to take, but
# that no test covers yet: refused with a message saying so.
DESIGNED_SCHEMES = frozenset({"gs", "abfs", "abfss", "wasb", "wasbs", "az", "azure", "adl"})

_OBJECT_SCHEMES = frozenset({"s3", "s3a"})

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def scheme_of(uri: str) -> str | None:
    """The lower-case URI scheme of ``uri``, or None for a plain path.

    One-letter prefixes are not schemes (``C:`` would be a drive, never a store).
    """
    match = _SCHEME.match(uri)
    return None if match is None else match.group(1).lower()


def _normal(path: str) -> str:
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//"; it names the same directory as "/" on every system we serve.
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return normal


def _file_uri_path(uri: str) -> str:
    """The local path of a ``file:`` URI: ``file:/a``, ``file:///a``, ``file://localhost/a``."""
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        authority, _, tail = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise InvalidArgumentError(
                f"{uri!r}: a file: URI with host {authority!r} is not a local path"
            )
        rest = "/" + tail
    decoded = unquote(rest)
    if not decoded.startswith("/"):
        raise InvalidArgumentError(f"{uri!r}: a file: URI must name an absolute path")
    return _normal(decoded)


def table_root(uri: str) -> str:
    """The canonical location of a table root given by a user (a path or a URI).

    A plain path is taken literally (a directory may be named ``a%20b``) and made absolute
    against the working directory; a ``file:`` URI is decoded.

    Raises:
        UnsupportedFeatureError: The URI's scheme names a store deltatx cannot write to yet.
        InvalidArgumentError: The path is empty or the URI is malformed.
    """
    if not uri or not uri.strip():
        raise InvalidArgumentError("a table path must not be empty")
    scheme = scheme_of(uri)
    if scheme is None:
        return _normal(posixpath.abspath(uri))
    if scheme in DESIGNED_SCHEMES:
        raise UnsupportedFeatureError(
            f"{uri!r}: tables on {scheme}:// storage are not supported yet; Google Cloud "
            "Storage and Azure Blob Storage are designed to slot in beside S3 with their own "
            "conditional writes, but are not yet tested. Nothing was written.",
            feature=f"storage:{scheme}",
        )
    if scheme not in SUPPORTED_SCHEMES:
        raise UnsupportedFeatureError(
            f"{uri!r}: tables on {scheme}:// storage are not supported yet; deltatx reads and "
            "writes tables on the local filesystem (a path or a file: URI) and on S3 (s3:// or "
            "s3a://). Nothing was written.",
            feature=f"storage:{scheme}",
        )
    if scheme in _OBJECT_SCHEMES:
        return object_uri(uri)
    return _file_uri_path(uri)


def object_uri(uri: str) -> str:
    """The canonical location of an ``s3://`` or ``s3a://`` URI: ``s3://bucket/key``, decoded.

    ``s3a://`` is Hadoop's name for the same objects, so both spell one location.

    Raises:
        InvalidArgumentError: The URI names no bucket, or its key climbs with ``..``.
    """
    rest = unquote(uri.split("://", 1)[1]) if "://" in uri else ""
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise InvalidArgumentError(f"{uri!r}: an s3:// URI must name a bucket (s3://bucket/key)")
    parts = [p for p in key.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidArgumentError(f"{uri!r}: an object key must not contain '..' segments")
    return "/".join([f"s3://{bucket}", *parts])


def resolve(path: str, *, root: str) -> str:
    """The canonical location of a file path found in the log, for the table at ``root``.

    Args:
        path: The path as the log has it: relative (percent-encoded), absolute, or a URI.
        root: The table's canonical root (see :func:`table_root`).

    Raises:
        InvalidArgumentError: A ``file:`` URI names a remote host or a relative path.
    """
    scheme = scheme_of(path)
    if scheme == "file":
        return _file_uri_path(path)
    if scheme in _OBJECT_SCHEMES:
        return object_uri(path)
    if scheme is not None:
        return path.rstrip("/")
    decoded = unquote(path)
    if decoded.startswith("/") and scheme_of(root) is None:
        return _normal(decoded)
    if scheme_of(root) is not None:
        # Under an object store root, a path is a key below it (or, absolute, below the bucket).
        prefix, _, tail = root.partition("://")
        bucket, _, key = tail.partition("/")
        joined = _normal(decoded if decoded.startswith("/") else f"/{key}/{decoded}")
        return f"{prefix}://{bucket}{joined.rstrip('/')}"
    return _normal(f"{root}/{decoded}")


def relative_to(location: str, *, root: str) -> str | None:
    """``location`` relative to ``root`` when it lies strictly below it, else None."""
    prefix = root.rstrip("/") + "/"
    if location.startswith(prefix) and len(location) > len(prefix):
        return location[len(prefix) :]
    return None


def is_relative(path: str) -> bool:
    """Whether a path from the log is relative to the table root (no scheme, no leading ``/``)."""
    return not path.startswith("/") and scheme_of(path) is None


PLAIN_PATH_NOT = r"^$|%|:|^/|/$|//|(^|/)\.\.?(/|$)"
"""An RE2 pattern matching every path :func:`file_key` must resolve (it may match more)."""


def file_key(path: str, *, root: str) -> str:
    """The one key of the file a log path names, whatever its spelling.

    A file below ``root`` is keyed by its decoded path relative to the root, any other by its
    canonical location; so ``a%20b``, ``a b``, ``/root/a b`` and ``file:///root/a%20b`` are
    one file during replay. A path that cannot be resolved keys as itself (it still names one
    file, and reading it reports the fault).
    """
    if (
        path
        and path[0] not in "/."
        and path[-1] != "/"
        and "%" not in path
        and ":" not in path
        and "//" not in path
        and "/." not in path
    ):
        # Already canonical (no escape, scheme, empty or dot segment): most log paths.
        return path
    try:
        location = resolve(path, root=root)
    except InvalidArgumentError:
        return path
    relative = relative_to(location, root=root)
    return location if relative is None else relative
