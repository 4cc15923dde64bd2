"""Tables on S3 and S3-compatible object stores: a LogStore whose commit is a conditional PUT.

Write-if-absent is one ``PutObject`` with ``If-None-Match: *``: the store accepts it only when
no object has the key, so of many writers racing for ``N.json`` exactly one wins and the others
get 412, with no lock service beside the bucket. The outcome of a PUT is not always known:

- 412 means another object holds the key: :class:`FileAlreadyExistsError`, which sends the
  commit to conflict checking.
- 409 (a concurrent conditional write is in progress), 429 and 5xx say nothing was decided:
  the PUT is retried with exponential backoff and jitter.
- A timeout or a dropped connection leaves it open whether the object landed. The PUT is
  retried the same way; if a retry then meets 412, the object is read back, and when it holds
  exactly the bytes this writer sent the write has landed (a commit carries its transaction's
  unique ``txnId``, so no other writer can have sent the same bytes). When every retry fails
  the store raises :class:`AmbiguousWriteError`, and the commit path decides by reading
  ``N.json`` for its own ``txnId``.

Botocore's own retries are off: a retry it made silently after a lost response would turn a
landed commit into a 412 nobody could explain.

Credentials and region come from the standard AWS environment variables and configuration
files. ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (or ``endpoint_url`` in the profile)
points at an S3-compatible store; path-style addressing is used there.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import botocore.config
import botocore.exceptions
import botocore.session
import pyarrow.fs as pafs

from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus
from deltatx.storage.s3_faults import FaultInjectingS3Client, plan_from_env

S3_SCHEMES = frozenset({"s3", "s3a"})
"""The URI schemes of tables on S3; ``s3a://`` (Hadoop's spelling) names the same objects."""

_RETRY_STATUS = frozenset({409, 429, 500, 502, 503, 504})
_RETRY_CODES = frozenset(
    {
        "ConditionalRequestConflict",
        "SlowDown",
        "InternalError",
        "RequestTimeout",
        "ServiceUnavailable",
    }
)
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_DEFAULT_REGION = "us-east-1"

T = TypeVar("T")


class AmbiguousWriteError(OSError):
    """A write's outcome is unknown: every attempt timed out or failed without an answer."""


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where the store is, resolved from the AWS environment and configuration files.

    Credentials are not held here: the botocore client and pyarrow's filesystem each follow
    the standard AWS chain (environment, ``~/.aws`` files, instance or container roles), which
    also renews temporary credentials before they expire.

    Attributes:
        region: The bucket's region.
        endpoint_url: The endpoint of an S3-compatible store, or None for AWS itself.
    """

    region: str
    endpoint_url: str | None

    @classmethod
    def from_environment(cls) -> S3Settings:
        """Reads ``AWS_*`` variables and ``~/.aws/config`` (the profile ``AWS_PROFILE`` names)."""
        session = botocore.session.get_session()
        scoped = session.get_scoped_config()
        endpoint = (
            os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or scoped.get("endpoint_url")
        )
        region = (
            os.environ.get("AWS_REGION") or session.get_config_variable("region") or _DEFAULT_REGION
        )
        return cls(region=str(region), endpoint_url=str(endpoint) if endpoint else None)

    def client(self) -> Any:
        """A botocore S3 client without retries of its own (see the module docstring)."""
        config = botocore.config.Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            s3={"addressing_style": "path" if self.endpoint_url else "auto"},
            connect_timeout=5,
            read_timeout=30,
            max_pool_connections=32,
        )
        return botocore.session.get_session().create_client(
            "s3", region_name=self.region, endpoint_url=self.endpoint_url, config=config
        )

    def filesystem(self) -> pafs.S3FileSystem:
        """The pyarrow filesystem for data files, reaching the same endpoint."""
        scheme = "https"
        endpoint = self.endpoint_url
        if endpoint is not None:
            scheme, _, endpoint = endpoint.partition("://")
        return pafs.S3FileSystem(region=self.region, endpoint_override=endpoint, scheme=scheme)


@functools.lru_cache(maxsize=8)
def _shared(environment: tuple[tuple[str, str], ...]) -> tuple[Any, pafs.S3FileSystem]:
    settings = S3Settings.from_environment()
    return settings.client(), settings.filesystem()


def shared_client_and_filesystem() -> tuple[Any, pafs.S3FileSystem]:
    """One client and one filesystem per process and configuration (both are thread-safe).

    Resolving credentials reads files and may call a metadata service, so it is done once per
    set of ``AWS_*`` variables rather than for every table opened.
    """
    return _shared(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))


def split(location: str) -> tuple[str, str]:
    """The bucket and key of a canonical ``s3://bucket/key`` location."""
    rest = location.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key


def _status(exc: botocore.exceptions.ClientError) -> tuple[int, str]:
    meta = exc.response.get("ResponseMetadata", {})
    error = exc.response.get("Error", {})
    return int(meta.get("HTTPStatusCode") or 0), str(error.get("Code") or "")


def _transient(exc: Exception) -> bool:
    """Whether a failed call decided nothing and may be retried."""
    if isinstance(exc, botocore.exceptions.ClientError):
        status, code = _status(exc)
        return status in _RETRY_STATUS or code in _RETRY_CODES
    return isinstance(
        exc, botocore.exceptions.HTTPClientError | botocore.exceptions.ConnectionError
    )


def _unanswered(exc: Exception) -> bool:
    """Whether the request may have reached the store although no answer came back."""
    return isinstance(
        exc, botocore.exceptions.HTTPClientError | botocore.exceptions.ConnectionError
    ) or (isinstance(exc, botocore.exceptions.ClientError) and _status(exc)[0] >= 500)


class S3LogStore:
    """LogStore over S3 (see the module docstring); paths are ``s3://bucket/key``."""

    def __init__(
        self,
        client: Any | None = None,
        *,
        attempts: int = 8,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
    ) -> None:
        """Creates a store.

        Args:
            client: A botocore S3 client; by default one from the AWS environment.
            attempts: How many times a call that decided nothing is tried in all.
            backoff: The first retry's delay in seconds; it doubles each time, with jitter.
            max_backoff: The longest delay between two attempts.
        """
        if client is None:
            client = shared_client_and_filesystem()[0]
            plan = plan_from_env()
            if plan is not None:
                client = FaultInjectingS3Client(client, plan)
        self._client = client
        self._attempts = attempts
        self._backoff = backoff
        self._max_backoff = max_backoff

    def _sleep(self, attempt: int) -> None:
        delay = min(self._max_backoff, self._backoff * 2 ** (attempt - 1))
        time.sleep(random.uniform(delay / 2, delay))

    def _call(self, fn: Callable[[], T]) -> T:
        for attempt in range(1, self._attempts + 1):
            try:
                return fn()
            except Exception as exc:
                if not _transient(exc) or attempt == self._attempts:
                    raise
            self._sleep(attempt)
        raise AssertionError("unreachable")

    def read(self, path: str) -> bytes:
        """The whole object; ``FileNotFoundError`` if absent."""
        bucket, key = split(path)
        try:
            body = self._call(lambda: self._client.get_object(Bucket=bucket, Key=key)["Body"])
            return bytes(body.read())
        except botocore.exceptions.ClientError as exc:
            status, code = _status(exc)
            if status == 404 or code in _NOT_FOUND_CODES:
                raise FileNotFoundError(path) from None
            if status == 403:
                raise PermissionError(f"{path}: access denied ({code})") from None
            raise OSError(f"{path}: {exc}") from exc

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes a whole object; without ``overwrite`` only if no object has the key.

        Raises:
            FileAlreadyExistsError: Another object holds the key (412).
            AmbiguousWriteError: No attempt got an answer; the object may or may not be there.
        """
        bucket, key = split(path)
        extra = {} if overwrite else {"IfNoneMatch": "*"}
        maybe_landed = False
        for attempt in range(1, self._attempts + 1):
            try:
                self._client.put_object(Bucket=bucket, Key=key, Body=data, **extra)
                return
            except botocore.exceptions.ClientError as exc:
                status, code = _status(exc)
                if status == 412 and not overwrite:
                    if maybe_landed and self._holds(path, data):
                        return
                    raise FileAlreadyExistsError(path) from None
                if status == 403:
                    raise PermissionError(f"{path}: access denied ({code})") from None
                if not _transient(exc):
                    raise OSError(f"{path}: {exc}") from exc
                maybe_landed = maybe_landed or _unanswered(exc)
                last: Exception = exc
            except (botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError) as e:
                maybe_landed = True
                last = e
            if attempt < self._attempts:
                self._sleep(attempt)
        if maybe_landed:
            if self._holds(path, data):
                return
            raise AmbiguousWriteError(
                f"{path}: no answer after {self._attempts} attempts ({last}); the object may "
                "still appear"
            )
        raise OSError(f"{path}: the store kept failing after {self._attempts} attempts ({last})")

    def _holds(self, path: str, data: bytes) -> bool:
        try:
            return self.read(path) == data
        except FileNotFoundError:
            return False

    def _pages(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            args = dict(kwargs, ContinuationToken=token) if token else kwargs
            page: dict[str, Any] = self._call(
                functools.partial(self._client.list_objects_v2, **args)
            )
            yield page
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Objects directly under ``directory`` whose names sort at or after ``start_name``."""
        bucket, key = split(directory.rstrip("/"))
        prefix = f"{key}/" if key else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        if start_name:
            # StartAfter is exclusive: start just before the name and filter below.
            kwargs["StartAfter"] = prefix + start_name[:-1]
        out: list[FileStatus] = []
        for page in self._pages(**kwargs):
            for item in page.get("Contents", []):
                name = item["Key"][len(prefix) :]
                if name < start_name or not name or name.startswith("."):
                    continue
                out.append(_status_of(bucket, item))
        out.sort(key=lambda s: s.name)
        return out

    def exists(self, path: str) -> bool:
        """Whether an object, or any object below ``path/``, exists."""
        bucket, key = split(path.rstrip("/"))
        try:
            self._call(lambda: self._client.head_object(Bucket=bucket, Key=key))
            return True
        except botocore.exceptions.ClientError as exc:
            if _status(exc)[0] not in (403, 404):
                raise
        page = next(self._pages(Bucket=bucket, Prefix=f"{key}/", MaxKeys=1))
        return bool(page.get("KeyCount"))

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every object under ``root``."""
        bucket, key = split(root.rstrip("/"))
        for page in self._pages(Bucket=bucket, Prefix=f"{key}/" if key else ""):
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):
                    yield _status_of(bucket, item)

    def delete(self, path: str) -> None:
        """Removes an object; a missing object is not an error."""
        bucket, key = split(path)
        self._call(lambda: self._client.delete_object(Bucket=bucket, Key=key))


def _status_of(bucket: str, item: dict[str, Any]) -> FileStatus:
    return FileStatus(
        path=f"s3://{bucket}/{item['Key']}",
        size=int(item["Size"]),
        modification_time=int(item["LastModified"].timestamp() * 1000),
    )
