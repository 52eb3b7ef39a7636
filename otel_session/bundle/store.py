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
before it counts, in its one request: the server takes the body only with the length and the
``Content-MD5`` sent (else the request fails), and the ETag it answers must be the archive's MD5
(one ``PutObject``, never multipart, so the ETag is the MD5; no second request to look: a
``HeadObject`` cost as much collector CPU as the upload itself). Uploading the same run again writes the
same key: a retried upload never makes a second copy. A fetch is checked against the object's size
and ETag, and unpacks only the bundle's own file names, as regular files, into a private directory
(``archive``'s rules); an object that is no bundle archive unpacks to nothing, and reads as an
invalid bundle. Object keys are built from run paths only (the session's directory name: a keyed
hash when its id holds personal data), never from a raw id.

Endpoint and credentials come from the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``) through boto3
(``pip install 'otel-session[s3]'``). Every failure to reach or use the store is
:class:`StoreUnavailable`, one line naming the cause (an unreachable endpoint, a missing bucket,
refused credentials); a run the store lacks is :class:`RunNotStored`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import urlsplit

from otel_session.core import layout

from .archive import BUNDLE_FILES, bundle_archive
from .files import make_private_dir, make_private_dirs
from .read import iter_run_dirs

__all__ = [
    "ENV_STORE", "BadStoreUrl", "BundleStore", "LocalStore", "RunNotStored", "S3Store", "StoreUnavailable", "Stored",
    "open_store",
]

ENV_STORE = "OTEL_SESSION_STORE"
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
    """Sealed runs as objects in an S3-compatible bucket (boto3)."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None, *, timeout_s: float = _TIMEOUT_S) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise BadStoreUrl("an s3:// store needs boto3: pip install 'otel-session[s3]'") from None
            # A session of its own: the default one keeps the first credentials it found for the process.
            client = boto3.session.Session().client("s3", config=Config(connect_timeout=timeout_s, read_timeout=timeout_s,
                                                      retries={"max_attempts": 1}))
        self.client = client

    def key(self, relative: str) -> str:
        name = f"{_checked(relative)}.tar"
        return f"{self.prefix}/{name}" if self.prefix else name

    def put_run(self, root: Path, relative: str) -> Stored:
        path = root / _checked(relative)
        data = bundle_archive(path, path.name)
        digest = hashlib.md5(data).digest()  # noqa: S324 - S3's ETag of a single PutObject, not a secret
        md5 = digest.hex()
        key = self.key(relative)
        with _failing(f"upload of {relative}"):  # the server checks the body against Content-MD5 (and its length)
            put = self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType="application/x-tar",
                                         ContentLength=len(data), ContentMD5=base64.b64encode(digest).decode())
        etag = str(put.get("ETag", "")).strip('"')
        if etag != md5:  # what the server stored is what was sent: one request, no second one to look
            raise StoreUnavailable(f"upload of {relative} did not check: ETag {etag!r}; expected MD5 {md5}")
        return Stored(f"s3://{self.bucket}/{key}", len(data), md5)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def location(self, relative: str) -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"

    def fetch_run(self, relative: str, cache: Path) -> Path:
        key = self.key(relative)
        try:
            with _failing(f"download of {relative}"):
                answer = self.client.get_object(Bucket=self.bucket, Key=key)
                data = answer["Body"].read()
        except _NoSuchKey:
            raise RunNotStored(relative) from None
        size, etag = answer.get("ContentLength"), str(answer.get("ETag", "")).strip('"')
        if size != len(data) or ("-" not in etag and etag != hashlib.md5(data).hexdigest()):  # noqa: S324 - the ETag
            raise StoreUnavailable(f"download of {relative} did not check: {len(data)} bytes received of {size}, "
                                   f"ETag {etag!r}")
        target = cache / relative
        make_private_dirs(cache, target.parent)
        _unpack(data, target)
        return target

    def has_run(self, relative: str) -> bool:
        try:
            with _failing(f"lookup of {relative}"):
                self.client.head_object(Bucket=self.bucket, Key=self.key(relative))
        except _NoSuchKey:
            return False
        return True


    def list_runs(self) -> Iterator[str]:
        start = f"{self.prefix}/" if self.prefix else ""
        paginator = self.client.get_paginator("list_objects_v2")
        with _failing(f"listing of {self.url}"):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                for entry in page.get("Contents", []):
                    relative = entry["Key"][len(start):].removesuffix(".tar")
                    if entry["Key"].endswith(".tar") and _is_run_path(relative):
                        yield relative

    def check(self) -> None:
        """:class:`StoreUnavailable` unless the bucket can be listed (endpoint, bucket, credentials)."""
        with _failing(f"the store {self.url}"):
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else "", MaxKeys=1)


class _NoSuchKey(Exception):
    pass


_CREDENTIALS_REFUSED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "InvalidToken",
                        "ExpiredToken")


@contextmanager
def _failing(what: str) -> Iterator[None]:
    """botocore's errors as :class:`StoreUnavailable` (a missing key: :class:`_NoSuchKey`)."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code in ("404", "NoSuchKey", "NotFound"):
            raise _NoSuchKey() from None
        if code == "NoSuchBucket":
            bucket = error.get("BucketName") or exc.response.get("ResponseMetadata", {}).get("HostId") or ""
            raise StoreUnavailable(f"{what} failed: no such bucket{f' {bucket!r}' if bucket else ''} "
                                   "(make it, or check --store)") from None
        if code in _CREDENTIALS_REFUSED:
            raise StoreUnavailable(f"{what} failed: the store refused the credentials ({code}): check "
                                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
        raise StoreUnavailable(f"{what} failed: {code} {error.get('Message', '')}".strip()) from None
    except NoCredentialsError:
        raise StoreUnavailable(f"{what} failed: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
    except EndpointConnectionError as exc:
        endpoint = urlsplit(str(exc.kwargs.get("endpoint_url", "")))
        raise StoreUnavailable(f"{what} failed: cannot reach the store at {endpoint.scheme}://{endpoint.netloc} "
                               "(check AWS_ENDPOINT_URL)") from None
    except (BotoCoreError, OSError) as exc:
        raise StoreUnavailable(f"{what} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


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
