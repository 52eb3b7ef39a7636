"""Where sealed bundles live: the local root (today's), or S3-compatible object storage.

Contract::

    store = open_store("s3://BUCKET/PREFIX")      # or $OTEL_SESSION_STORE; None when unset (local root only)
    stored = store.put_run(root, "sessions/s/run-…")   # Stored(location, size, md5): checked, else StoreUnavailable
    path = store.fetch_run("sessions/s/run-…", cache)  # the bundle unpacked under cache/<relative>, checked
    store.has_run("sessions/s/run-…") -> bool
    store.list_runs() -> Iterator[str]                 # the relative path of every run the store holds
    store.location("sessions/s/run-…") -> "s3://BUCKET/PREFIX/sessions/s/run-….tar"

A run is one object, ``<PREFIX>/<relative run path>.tar``: the viewer's download archive
(``archive.bundle_archive``: ``<run_id>/run.json``, ``events.ndjson``, ...). An upload is checked
before it counts, in its one request: the request is signed over the body's SHA-256 (and carries
it as ``x-amz-checksum-sha256``), so the server takes the body only as it was sent, and the ETag it
answers must be the archive's MD5 (one ``PutObject``, never multipart, so the ETag is the MD5; no
second request to look: a ``HeadObject`` cost as much collector CPU as the upload itself). Uploading
the same run again writes the same key: a retried upload never makes a second copy. A fetch is
checked against the object's size and ETag, and unpacks only the bundle's own file names, as
regular files, into a private directory (``archive``'s rules); an object that is no bundle archive
unpacks to nothing, and reads as an invalid bundle. Object keys are built from run paths only (the
session's directory name: a keyed hash when its id holds personal data), never from a raw id.

Endpoint and credentials come from the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``) through obstore, the Python
binding of Rust's ``object_store`` (``pip install 'otel-session[s3]'``): one upload costs the
collector about a sixth of boto3's CPU (``bench.upload``). Every failure to reach or use the store
is :class:`StoreUnavailable`, one line naming the cause (an unreachable endpoint, a missing bucket,
refused credentials); a run the store lacks is :class:`RunNotStored`.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Protocol
from urllib.parse import urlsplit

from otel_session.core import layout
from otel_session.core.config import ENV_STORE

from .archive import BUNDLE_FILES, bundle_archive
from .files import make_private_dir, make_private_dirs
from .read import iter_run_dirs

__all__ = [
    "ENV_STORE", "BadStoreUrl", "BundleStore", "LocalStore", "RunNotStored", "S3Store", "StoreUnavailable", "Stored",
    "open_store",
]

_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]").fullmatch
_TIMEOUT_S = 30


class StoreUnavailable(Exception):
    """The store cannot be reached or refused the request (retry later)."""


class RunNotStored(LookupError):
    """The store holds no such run."""


class BadStoreUrl(ValueError):
    """A ``--store`` value no store accepts (one line)."""


@dataclass(frozen=True)
class Stored:
    location: str
    """Where the run is: ``s3://bucket/key`` (or the run directory for the local root)."""
    size: int
    md5: str


class BundleStore(Protocol):
    def put_run(self, root: Path, relative: str) -> Stored:
        """Upload the sealed run ``root/relative`` and check it; :class:`StoreUnavailable` else."""

    def fetch_run(self, relative: str, cache: Path) -> Path:
        """The run as a local directory (``cache/relative`` for a remote store)."""

    def has_run(self, relative: str) -> bool:
        """Whether the store holds the run."""

    def list_runs(self) -> Iterator[str]:
        """The relative path of every run the store holds."""

    def location(self, relative: str) -> str:
        """Where the run is (or would be) stored."""


@dataclass(frozen=True)
class LocalStore:
    """Today's store: the bundle root itself (nothing to upload, nothing to fetch)."""

    root: Path

    def put_run(self, root: Path, relative: str) -> Stored:
        path = root / relative
        size = sum(file.stat().st_size for file in path.iterdir() if file.is_file())
        return Stored(str(path), size, "")

    def fetch_run(self, relative: str, cache: Path) -> Path:
        path = self.root / relative
        if not path.is_dir():
            raise RunNotStored(relative)
        return path

    def has_run(self, relative: str) -> bool:
        return (self.root / relative).is_dir()

    def list_runs(self) -> Iterator[str]:
        prefix = len(os.fspath(self.root)) + 1
        for path in iter_run_dirs(self.root, include_evals=True):
            yield os.fspath(path)[prefix:].replace(os.sep, "/")

    def location(self, relative: str) -> str:
        return str(self.root / _checked(relative))


class S3Store:
    """Sealed runs as objects in an S3-compatible bucket (obstore: Rust's ``object_store``)."""

    def __init__(self, bucket: str, prefix: str = "", *, timeout_s: float = _TIMEOUT_S) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        try:
            from obstore.store import S3Store as ObjectStore
        except ImportError:
            raise BadStoreUrl("an s3:// store needs obstore: pip install 'otel-session[s3]'") from None
        self.endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        # The AWS_* variables are read by object_store itself; a retry is the uploader's (its backoff).
        options: dict[str, str | bool] = {"connect_timeout": f"{timeout_s}s", "timeout": f"{timeout_s}s"}
        if self.endpoint.startswith("http://"):
            options["allow_http"] = True
        self.client = ObjectStore(bucket, client_options=options, checksum_algorithm="sha256",
                                  retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=timeout_s)})

    def key(self, relative: str) -> str:
        name = f"{_checked(relative)}.tar"
        return f"{self.prefix}/{name}" if self.prefix else name

    def put_run(self, root: Path, relative: str) -> Stored:
        import obstore

        path = root / _checked(relative)
        data = bundle_archive(path, path.name)
        md5 = hashlib.md5(data).hexdigest()  # noqa: S324 - S3's ETag of a single PutObject, not a secret
        key = self.key(relative)
        with self._failing(f"upload of {relative}"):  # the server checks the body against its signed SHA-256
            put = obstore.put(self.client, key, data, attributes={"Content-Type": "application/x-tar"},
                              use_multipart=False)
        etag = str(put.get("e_tag") or "").strip('"')
        if etag != md5:  # what the server stored is what was sent: one request, no second one to look
            raise StoreUnavailable(f"upload of {relative} did not check: ETag {etag!r}; expected MD5 {md5}")
        return Stored(f"s3://{self.bucket}/{key}", len(data), md5)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def location(self, relative: str) -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"

    def fetch_run(self, relative: str, cache: Path) -> Path:
        import obstore

        key = self.key(relative)
        try:
            with self._failing(f"download of {relative}"):
                answer = obstore.get(self.client, key)
                data = bytes(answer.bytes())
        except FileNotFoundError:
            raise RunNotStored(relative) from None
        size, etag = answer.meta["size"], str(answer.meta.get("e_tag") or "").strip('"')
        if size != len(data) or ("-" not in etag and etag != hashlib.md5(data).hexdigest()):  # noqa: S324 - the ETag
            raise StoreUnavailable(f"download of {relative} did not check: {len(data)} bytes received of {size}, "
                                   f"ETag {etag!r}")
        target = cache / relative
        make_private_dirs(cache, target.parent)
        _unpack(data, target)
        return target

    def has_run(self, relative: str) -> bool:
        import obstore

        try:
            with self._failing(f"lookup of {relative}"):
                obstore.head(self.client, self.key(relative))
        except FileNotFoundError:
            return False
        return True

    def list_runs(self) -> Iterator[str]:
        import obstore

        start = f"{self.prefix}/" if self.prefix else ""
        with self._failing(f"listing of {self.url}"):
            for page in obstore.list(self.client, prefix=self.prefix or None):
                for entry in page:
                    relative = entry["path"][len(start):].removesuffix(".tar")
                    if entry["path"].startswith(start) and entry["path"].endswith(".tar") and _is_run_path(relative):
                        yield relative

    def check(self) -> None:
        """:class:`StoreUnavailable` unless the bucket can be listed (endpoint, bucket, credentials)."""
        import obstore

        with self._failing(f"the store {self.url}"):
            next(iter(obstore.list(self.client, prefix=self.prefix or None, chunk_size=1)), None)

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """obstore's errors as :class:`StoreUnavailable`, one line (a missing key stays FileNotFoundError)."""
        from obstore.exceptions import BaseError

        try:
            yield
        except FileNotFoundError as exc:
            if "NoSuchBucket" in str(exc):
                raise StoreUnavailable(f"{what} failed: no such bucket {self.bucket!r} (make it, or check --store)") from None
            raise
        except (BaseError, OSError) as exc:
            raise StoreUnavailable(f"{what} failed: {self._cause(str(exc))}") from None

    def _cause(self, message: str) -> str:
        code = _ERROR_CODE(message)
        if code and code[1] == "NoSuchBucket":
            return f"no such bucket {self.bucket!r} (make it, or check --store)"
        if code and code[1] in _CREDENTIALS_REFUSED:
            return (f"the store refused the credentials ({code[1]}): check AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY")
        if _METADATA_ENDPOINT in message:  # no key pair in the environment: object_store asked the instance
            return "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        if "error sending request" in message or "timed out" in message:
            endpoint = urlsplit(self.endpoint)
            return (f"cannot reach the store at {endpoint.scheme}://{endpoint.netloc} (check AWS_ENDPOINT_URL)"
                    if endpoint.netloc else "cannot reach the store (check AWS_ENDPOINT_URL)")
        if code:
            return code[1]
        return message.splitlines()[0] if message else "unknown error"


_ERROR_CODE = re.compile(r"<Code>([^<]*)</Code>").search
_METADATA_ENDPOINT = "169.254.169.254"
_CREDENTIALS_REFUSED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken")


def _is_run_path(relative: str) -> bool:
    """``sessions/<name>/run-…`` or ``evals/<name>/sessions/<name>/run-…``, never one leaving the root."""
    parts = PurePosixPath(relative).parts
    return (len(parts) in (3, 5) and not relative.startswith("/") and parts[-3] == "sessions"
            and (len(parts) == 3 or parts[0] == "evals") and not any(part in ("", ".", "..") for part in parts)
            and layout.is_valid_run_id(parts[-1]))


def _checked(relative: str) -> str:
    """A relative run path (``sessions/<name>/run-…``), never one leaving the root."""
    if not _is_run_path(relative):
        raise BadStoreUrl(f"not a run path: {relative!r}")
    return relative


def _unpack(data: bytes, target: Path) -> None:
    """The bundle's own files of one archive into ``target`` (made private; nothing else written)."""
    if not target.is_dir():
        make_private_dir(target)
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    except tarfile.TarError:
        return  # no bundle archive: an empty directory, read as an invalid bundle
    with archive:
        for member in archive.getmembers():
            name = PurePosixPath(member.name)
            if not member.isreg() or len(name.parts) != 2 or name.parts[1] not in BUNDLE_FILES:
                continue
            source = archive.extractfile(member)
            if source is None:
                continue
            destination = target / name.parts[1]
            fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(source.read())


def open_store(url: str | None = None) -> S3Store | None:
    """The store ``url`` (else ``$OTEL_SESSION_STORE``) names: ``s3://BUCKET[/PREFIX]``; None when
    neither is set (bundles stay in the local root). :class:`BadStoreUrl` for anything else."""
    url = (url or os.environ.get(ENV_STORE, "")).strip()
    if not url:
        return None
    scheme, separator, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme != "s3" or not separator or not _BUCKET_NAME(bucket):
        raise BadStoreUrl(f"--store must be s3://BUCKET[/PREFIX] (a bucket name: 3 to 63 lower-case letters, "
                          f"digits, dots and hyphens), not {url!r}")
    return S3Store(bucket, prefix)
