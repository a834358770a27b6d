"""Where the store's bytes live: a local folder (the embedded default) or a prefix of an S3 bucket.

The store root is given as a folder or as an S3 URI, `s3://bucket/prefix` (`--home`,
CHESS_PIPELINE_HOME, the Dagster StoreResource's `root`); `parse_root` turns it into a `Path` or
an `ObjectPath`. The S3 settings are read from the environment when a store is opened, never at
import (S3Settings, one declaration each):

- CHESS_PIPELINE_S3_ENDPOINT: the server's URL (`http://127.0.0.1:9000` for MinIO or moto,
  `https://...` for a hosted S3-compatible service); empty: AWS_ENDPOINT_URL_S3, then
  AWS_ENDPOINT_URL, then AWS's own endpoint for the region.
- AWS_REGION (else AWS_DEFAULT_REGION, else us-east-1).
- Credentials: the standard AWS chain (AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY [+
  AWS_SESSION_TOKEN], AWS_PROFILE, an instance role); nothing of them is stored here.

Clients: boto3 for object writes, conditional writes, listings and leases (its error codes are
documented and stable); fsspec's s3fs for reads, by DuckDB (`register_filesystem`, the PyPI
duckdb wheel has no httpfs) and by pyarrow (`filesystem=`). Both are built from one S3Settings.

What stays local for an S3 store (`local_dir`): the DuckDB file with the views (DuckDB cannot
keep a database on S3; its views read `s3://` globs through the registered filesystem), the
Dagster instance of the embedded profile, the CLI's progress files, and the spool of files
being written. It lies under CHESS_PIPELINE_CACHE (default $XDG_CACHE_HOME/chess-pipeline,
else ~/.cache/chess-pipeline), in `stores/<bucket>-<prefix>-<digest of endpoint and URI>`.

Atomic writes. An S3 object appears whole or not at all: a file is first written to a local
spool file (the same code that writes a local file writes it), then uploaded in one PUT, or
above MULTIPART_THRESHOLD as a multipart upload, which S3 shows only once it is completed. An
exception while the file is written uploads nothing; an exception during a multipart upload
aborts it (s3transfer sends AbortMultipartUpload); a process killed with SIGKILL leaves at most
an uncompleted multipart upload, which no reader sees (a bucket lifecycle rule
AbortIncompleteMultipartUpload reclaims its parts).

Partitions. Every table keeps one object per partition (`games/archive=<key>/data.parquet`,
the same for rejected_games and positions; an archive of more than IngestConfig.part_positions
positions goes on in data-0001.parquet, ..., part i of each table holding the same games) and a
re-ingest replaces each object with one PUT: a reader gets the old file or the new one, never a
mix of rows of both. Append-only tables (labels, label_failures) add new uniquely named parts
and never replace one. The tables of an archive are several objects: between their PUTs a reader
may see the new games beside the old positions of the same archive, as on a local store between
its renames; both are complete files of the same archive.

Beside this module: pipeline/store/storage_paths.py (ObjectPath, StorePath) and
pipeline/store/storage_leases.py (leases across machines: conditional PUTs of a small object).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

from pipeline.store.storage_paths import ObjectPath, StorePath

ENDPOINT_ENV = "CHESS_PIPELINE_S3_ENDPOINT"
ENDPOINT_FALLBACKS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
CACHE_ENV = "CHESS_PIPELINE_CACHE"
CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
ROOT_SETTING = "the store root (--home or CHESS_PIPELINE_HOME)"
MULTIPART_THRESHOLD = 64 << 20
"""Files up to this size go up in one PUT; larger ones as a multipart upload of such parts."""
SPOOL_STALE_S = 60.0
TMP_SUFFIX = ".tmp"
"""Suffix of every temporary file, local spool files and store files alike (remove_stale_tmp)."""
PRECONDITION_CODES = ("PreconditionFailed", "412")
"""The S3 error codes of a conditional write or read whose If-Match/If-None-Match did not hold."""
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


# Settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Settings:
    """How to reach the S3 server of an `s3://` store (read from the environment by from_env)."""

    endpoint: str = ""
    """Server URL, http(s)://host[:port]; empty: AWS's endpoint for the region."""
    endpoint_setting: str = ENDPOINT_ENV
    """The environment variable the endpoint came from (named in error messages)."""
    region: str = "us-east-1"
    """AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1."""
    connect_timeout_s: float = 5.0
    """Seconds to wait for a TCP connection before the endpoint counts as unreachable."""
    attempts: int = 3
    """Tries per request (botocore's standard retry mode) before an error is reported."""

    def __post_init__(self) -> None:
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"{self.endpoint_setting}={self.endpoint!r}: not a server URL; "
                    "give http://host:port or https://host (empty: AWS's own endpoint)"
                )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Settings:
        env = os.environ if environ is None else environ
        endpoint, setting = env.get(ENDPOINT_ENV, "").strip(), ENDPOINT_ENV
        for name in ENDPOINT_FALLBACKS:
            if endpoint:
                break
            endpoint, setting = env.get(name, "").strip(), name
        if not endpoint:
            setting = ENDPOINT_ENV
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        return cls(endpoint=endpoint.rstrip("/"), endpoint_setting=setting, region=region)

    @property
    def where(self) -> str:
        return self.endpoint or f"AWS S3 ({self.region})"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """CHESS_PIPELINE_CACHE, else $XDG_CACHE_HOME/chess-pipeline, else ~/.cache/chess-pipeline."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser().absolute()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (base / "chess-pipeline").absolute()


# Paths ----------------------------------------------------------------------------------------


def parse_root(text: str | os.PathLike) -> StorePath:
    """A store root from what the user gave: `s3://bucket[/prefix]` or a folder (absolute, ~ expanded)."""
    if isinstance(text, ObjectPath):
        return text
    raw = os.fspath(text) if not isinstance(text, str) else text
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", raw):
        parts = urlsplit(raw)
        if parts.scheme.lower() not in ("s3", "s3a"):
            raise ValueError(
                f"{raw}: {ROOT_SETTING} must be a folder or an s3://bucket/prefix URI, not {parts.scheme}://"
            )
        bucket = parts.netloc
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise ValueError(
                f"{raw}: {bucket!r} is not an S3 bucket name (3-63 characters: lowercase letters, digits, "
                f"dots, hyphens); fix {ROOT_SETTING}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"{raw}: an S3 store root takes no ?query or #fragment; fix {ROOT_SETTING}")
        return ObjectPath(bucket, parts.path)
    return Path(raw).expanduser().resolve()


def local_cache_dir(root: ObjectPath, settings: S3Settings | None = None) -> Path:
    """The local folder of an S3 store (DuckDB file, embedded Dagster instance, spool)."""
    settings = settings or S3Settings.from_env()
    digest = hashlib.sha1(f"{settings.endpoint}\n{root}".encode()).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", root.path)[:80]
    return cache_root() / "stores" / f"{readable}-{digest}"


# Errors ---------------------------------------------------------------------------------------


class StoreUnavailable(OSError):
    """The S3 store cannot be used as configured: unreachable endpoint, refused credentials, no
    such bucket. The message is one line naming the setting to fix."""

    def __str__(self) -> str:
        return self.args[0] if self.args else "the S3 store is unavailable"


class PreconditionFailed(Exception):
    """A conditional write lost: the object exists (If-None-Match) or changed (If-Match)."""


_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AuthorizationHeaderMalformed",
        "InvalidClientTokenId",
        "403",
    }
)


def _credentials_hint() -> str:
    return "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN / AWS_PROFILE if you use them)"


def raise_unavailable(e: BaseException, where: ObjectPath, settings: S3Settings) -> None:
    """Raise StoreUnavailable (from e) when e is a configuration error; return otherwise, for the
    caller to re-raise e itself."""
    translated = translate(e, where, settings)
    if translated is not e:
        raise translated from e


def translate(e: BaseException, where: ObjectPath, settings: S3Settings) -> BaseException:
    """A botocore/s3fs error as a StoreUnavailable with one line naming the setting to fix, or e itself."""
    import botocore.exceptions as bx

    target = f"s3://{where.bucket}"
    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError)) or (
        isinstance(e, bx.HTTPClientError) and not isinstance(e, bx.ReadTimeoutError)
    ):
        return StoreUnavailable(
            f"{target}: cannot reach the S3 server at {settings.where} ({type(e).__name__}); "
            f"check {settings.endpoint_setting} and that the server is running"
        )
    if isinstance(e, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return StoreUnavailable(f"{target}: no S3 credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    if isinstance(e, bx.ClientError):
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchBucket",) or (code == "404" and not where.key):
            return StoreUnavailable(
                f"{target}: the bucket {where.bucket!r} does not exist at {settings.where}; create it, "
                f"or fix {ROOT_SETTING} (or {settings.endpoint_setting} if it names the wrong server)"
            )
        if code in _CREDENTIAL_CODES or status == 403:
            return StoreUnavailable(
                f"{target}: {settings.where} refused the credentials ({code or status}); {_credentials_hint()}"
            )
    return e


# Clients --------------------------------------------------------------------------------------


def _credential_key() -> tuple:
    return tuple(hashlib.sha1(os.environ.get(v, "").encode()).hexdigest() for v in CREDENTIAL_VARS)


@functools.cache
def _client(settings: S3Settings, _creds: tuple):
    import boto3
    from botocore.config import Config

    config = Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=60,
        retries={"max_attempts": settings.attempts, "mode": "standard"},
        s3={"addressing_style": "path"} if settings.endpoint else {},
    )
    return boto3.session.Session().client("s3", endpoint_url=settings.endpoint or None, config=config)


def client(settings: S3Settings | None = None):
    """The boto3 S3 client for these settings (one per settings and credentials, per process)."""
    return _client(settings or S3Settings.from_env(), _credential_key())


def fsspec_filesystem(settings: S3Settings | None = None):
    """An s3fs filesystem for these settings, with no listing cache (a DuckDB glob must see the
    files written a moment ago). Registered on DuckDB connections, passed to pyarrow readers."""
    import s3fs

    settings = settings or S3Settings.from_env()
    return s3fs.S3FileSystem(
        endpoint_url=settings.endpoint or None,
        use_listings_cache=False,
        skip_instance_cache=True,
        client_kwargs={"region_name": settings.region},
        config_kwargs={
            "connect_timeout": settings.connect_timeout_s,
            "retries": {"max_attempts": settings.attempts, "mode": "standard"},
            **({"s3": {"addressing_style": "path"}} if settings.endpoint else {}),
        },
    )


os.register_at_fork(after_in_child=_client.cache_clear)  # a forked worker makes its own connections


def call(op: str, where: ObjectPath, settings: S3Settings | None = None, *, missing_ok: bool = False, **kwargs):
    """client.<op>(**kwargs), with configuration errors turned into StoreUnavailable and a lost
    condition into PreconditionFailed. missing_ok: None when there is no such object."""
    import botocore.exceptions as bx

    settings = settings or S3Settings.from_env()
    try:
        return getattr(client(settings), op)(**kwargs)
    except bx.ClientError as e:
        if missing_ok and _not_found(e):
            return None
        if e.response.get("Error", {}).get("Code") in (*PRECONDITION_CODES, "ConditionalRequestConflict"):
            raise PreconditionFailed(f"{where}: {e.response['Error'].get('Message', 'precondition failed')}") from None
        raise_unavailable(e, where, settings)
        raise
    except bx.BotoCoreError as e:
        raise_unavailable(e, where, settings)
        raise


def check_bucket(root: ObjectPath, settings: S3Settings | None = None) -> None:
    """Raise StoreUnavailable (one line) unless the endpoint answers, takes the credentials and
    has the bucket. Reads only: nothing is written."""
    settings = settings or S3Settings.from_env()
    call("head_bucket", ObjectPath(root.bucket), settings, Bucket=root.bucket)


# Objects --------------------------------------------------------------------------------------


def _not_found(e) -> bool:
    return str(e.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound")


def head(path: ObjectPath) -> dict | None:
    """The object's metadata (head_object), or None when there is no such object."""
    return call("head_object", path, missing_ok=True, Bucket=path.bucket, Key=path.key)


@dataclass(frozen=True)
class Fetched:
    data: bytes
    etag: str
    last_modified: float
    """Server time of the last write (seconds since the epoch)."""
    server_now: float
    """The server's Date header of the reply (the local clock if it sent none)."""


def get(path: ObjectPath) -> Fetched | None:
    """The object's bytes, ETag and times, or None when there is no such object."""
    r = call("get_object", path, missing_ok=True, Bucket=path.bucket, Key=path.key)
    if r is None:
        return None
    data = r["Body"].read()
    date = r.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        now = parsedate_to_datetime(date).timestamp() if date else time.time()
    except (TypeError, ValueError):
        now = time.time()
    return Fetched(data, r["ETag"], r["LastModified"].timestamp(), now)


def put(path: ObjectPath, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
    """One PUT of data; returns the new ETag. if_none_match: only if no such object exists;
    if_match: only if the object's ETag is still this. PreconditionFailed otherwise."""
    kwargs = {"Bucket": path.bucket, "Key": path.key, "Body": data}
    if if_none_match:
        kwargs["IfNoneMatch"] = "*"
    if if_match is not None:
        kwargs["IfMatch"] = if_match
    return call("put_object", path, **kwargs)["ETag"]


def delete(path: ObjectPath, if_match: str | None = None) -> None:
    kwargs = {"Bucket": path.bucket, "Key": path.key}
    if if_match is not None:
        kwargs["IfMatch"] = if_match
    call("delete_object", path, **kwargs)


def remove(path: StorePath) -> None:
    """Remove a file or an S3 object; one that is not there is no error."""
    if isinstance(path, ObjectPath):
        delete(path)  # deleting a missing object is no error on S3
    else:
        Path(path).unlink(missing_ok=True)


def list_objects(prefix: ObjectPath) -> Iterator[dict]:
    """Every object under prefix/ (Key, Size, ETag, LastModified), in key order."""
    settings = S3Settings.from_env()
    token = None
    while True:
        kwargs = {"Bucket": prefix.bucket, "Prefix": prefix.key + "/" if prefix.key else ""}
        if token:
            kwargs["ContinuationToken"] = token
        page = call("list_objects_v2", prefix, settings, **kwargs)
        yield from page.get("Contents", [])
        if not page.get("IsTruncated"):
            return
        token = page["NextContinuationToken"]


def exists(path: StorePath) -> bool:
    """A file, or an object (or any object under the prefix, for a 'folder')."""
    if not isinstance(path, ObjectPath):
        return Path(path).exists()
    if head(path) is not None:
        return True
    page = call("list_objects_v2", path, Bucket=path.bucket, Prefix=path.key + "/", MaxKeys=1)
    return bool(page.get("KeyCount"))


def _head_existing(path: ObjectPath) -> dict:
    meta = head(path)
    if meta is None:
        raise FileNotFoundError(f"{path}: no such object")
    return meta


def size(path: StorePath) -> int:
    if not isinstance(path, ObjectPath):
        return Path(path).stat().st_size
    meta = _head_existing(path)
    return int(meta["ContentLength"])


def mtime_ns(path: StorePath) -> int:
    """When the file (object) was last written, in ns since the epoch."""
    if not isinstance(path, ObjectPath):
        return Path(path).stat().st_mtime_ns
    meta = _head_existing(path)
    return int(meta["LastModified"].timestamp() * 1e9)


def read_filesystem(path: StorePath):
    """(filesystem, path) for pyarrow readers: (None, path) locally, (s3fs, bucket/key) on S3."""
    if isinstance(path, ObjectPath):
        return fsspec_filesystem(), path.path
    return None, path


def read_table(paths: list[StorePath], columns: list[str]):
    """These columns of the Parquet files (local files or S3 objects) as one pyarrow table, the
    files' rows in the order given: e.g. every part of a partition (Store.partition_files)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for path in paths:
        fs, where = read_filesystem(path)
        tables.append(pq.read_table(where, columns=columns, filesystem=fs))
    return pa.concat_tables(tables) if tables else None


# Atomic uploads and downloads -----------------------------------------------------------------


def spool_dir() -> Path:
    d = cache_root() / "spool"
    d.mkdir(parents=True, exist_ok=True)
    return d


def upload_file(source: Path, dest: ObjectPath, metadata: dict[str, str] | None = None) -> None:
    """Upload a local file as dest: one PUT up to MULTIPART_THRESHOLD, else a multipart upload
    that is aborted when it fails; the object appears only when the upload completed."""
    from boto3.s3.transfer import TransferConfig

    settings = S3Settings.from_env()
    config = TransferConfig(multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_THRESHOLD)
    extra = {"Metadata": metadata} if metadata else None
    import boto3.exceptions
    import botocore.exceptions as bx

    try:
        client(settings).upload_file(str(source), dest.bucket, dest.key, ExtraArgs=extra, Config=config)
    except boto3.exceptions.S3UploadFailedError as e:
        cause = e.__cause__ or e.__context__
        if cause is not None:
            raise_unavailable(cause, dest, settings)
        raise
    except (bx.ClientError, bx.BotoCoreError) as e:
        raise_unavailable(e, dest, settings)
        raise


def remove_stale_tmp(folder: StorePath, min_age_s: float = 0.0, prefix: str = "") -> int:
    """Remove the temporary files (.*.tmp) in folder that no live writer holds.

    store_files.atomic_path keeps an flock on its temporary file until it is renamed, so a file whose
    lock is free belongs to a writer that has died. min_age_s spares files too new to be
    locked yet (created a moment ago by a writer that has not taken its lock). prefix narrows
    the files to .<prefix>*.tmp. An S3 folder has none: its temporary files are local spool
    files (atomic_upload), cleared there."""
    removed = 0
    if isinstance(folder, ObjectPath) or not folder.is_dir():
        return removed
    now = time.time()
    for p in folder.glob(f".{prefix}*{TMP_SUFFIX}"):
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            if min_age_s and now - os.fstat(fd).st_mtime < min_age_s:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer holds it
            p.unlink(missing_ok=True)
            removed += 1
        finally:
            os.close(fd)
    return removed


@contextmanager
def atomic_upload(dest: ObjectPath, metadata: dict[str, str] | None = None) -> Iterator[Path]:
    """Yield a local spool path; when the block ends without an exception the file is uploaded
    as dest (upload_file) and the spool file removed, whatever happens. The spool file is
    flock'ed while it lives, so remove_stale_tmp can clear those of killed writers."""
    folder = spool_dir()
    remove_stale_tmp(folder, min_age_s=SPOOL_STALE_S)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name[:100]}.", suffix=TMP_SUFFIX, dir=folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield Path(tmp)
        upload_file(Path(tmp), dest, metadata)
    finally:
        Path(tmp).unlink(missing_ok=True)
        os.close(fd)


@contextmanager
def _download_errors(path: ObjectPath, settings: S3Settings) -> Iterator[None]:
    """Inside: a missing object raises FileNotFoundError, a lost If-Match PreconditionFailed, a
    configuration error StoreUnavailable (one line); any other error is itself."""
    import botocore.exceptions as bx

    try:
        yield
    except bx.ClientError as e:
        if str(e.response.get("Error", {}).get("Code")) in PRECONDITION_CODES:
            raise PreconditionFailed(f"{path}: changed while it was read") from None
        if _not_found(e):
            raise FileNotFoundError(f"{path}: no such object in the store") from None
        raise_unavailable(e, path, settings)
        raise
    except bx.BotoCoreError as e:
        raise_unavailable(e, path, settings)
        raise


@contextmanager
def local_copy(path: ObjectPath) -> Iterator[Path]:
    """The object downloaded to a spool file (removed afterwards), for readers of local files."""
    settings = S3Settings.from_env()
    folder = spool_dir()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=f".download{_suffixes(path.name)}", dir=folder)
    os.close(fd)
    try:
        with _download_errors(path, settings):
            client(settings).download_file(path.bucket, path.key, tmp)
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def local_path(path: StorePath) -> Iterator[Path]:
    """`path` as a local file while the block runs: the file itself in a local store, a
    downloaded copy of the object (removed afterwards) in an S3 store."""
    if isinstance(path, ObjectPath):
        with local_copy(path) as local:
            yield local
    else:
        yield Path(path)


def cached_copy(path: ObjectPath) -> Path:
    """The object as a local file that stays, for readers that go over a file many times (the
    training loader reads every row group of a dataset split once per epoch; evaluation reads
    the EPD suites): `$CHESS_PIPELINE_CACHE/objects/<endpoint digest>/<bucket>/<key's folder>/
    <ETag digest>/<name>`. The ETag is read first and the download is conditional on it
    (If-Match), so the file under that ETag holds exactly that version; a newer version of the
    object gets a folder of its own and the older ones are removed. Downloaded to a temporary
    name and renamed into place, so concurrent readers never see a partial file. One GET, so
    the bytes are of one version even if the object is replaced meanwhile."""
    settings = S3Settings.from_env()
    for _ in range(3):  # the object may be replaced between the HEAD and the GET
        meta = head(path)
        if meta is None:
            raise FileNotFoundError(f"{path}: no such object in the store")
        etag = meta["ETag"]
        versions = (
            cache_root()
            / "objects"
            / hashlib.sha1(settings.endpoint.encode()).hexdigest()[:10]
            / path.bucket
            / path.parent.key
            / f".{path.name}.versions"
        )
        dest = versions / hashlib.sha1(etag.encode()).hexdigest()[:16] / path.name
        if dest.exists():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".download", dir=dest.parent)
        os.close(fd)
        try:
            with _download_errors(path, settings):
                body = client(settings).get_object(Bucket=path.bucket, Key=path.key, IfMatch=etag)["Body"]
                with open(tmp, "wb") as f:
                    for chunk in body.iter_chunks(1 << 20):
                        f.write(chunk)
            os.replace(tmp, dest)
        except PreconditionFailed:
            continue  # replaced meanwhile: read the new ETag
        finally:
            Path(tmp).unlink(missing_ok=True)
        for old in versions.iterdir():  # older versions of this object (best effort)
            if old != dest.parent:
                for f in old.glob("*"):
                    f.unlink(missing_ok=True)
                try:
                    old.rmdir()
                except OSError:
                    pass
        return dest
    raise OSError(f"{path}: the object kept changing while it was downloaded; try again")


def local_file(path: StorePath) -> Path:
    """A local file with path's bytes: path itself in a local store, else cached_copy(path)."""
    return cached_copy(path) if isinstance(path, ObjectPath) else Path(path)


def list_files(folder: StorePath, suffix: str = "") -> list[StorePath]:
    """The files directly in folder whose names end with suffix (any case), sorted; none when
    there is no such folder. A local folder's broken links are listed too."""
    if isinstance(folder, ObjectPath):
        out = []
        for obj in list_objects(folder):
            p = ObjectPath(folder.bucket, obj["Key"])
            if p.parent == folder and p.name.lower().endswith(suffix.lower()):
                out.append(p)
        return sorted(out)
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.lower().endswith(suffix.lower()) and not p.is_dir())


def read_bytes(path: StorePath) -> bytes:
    if isinstance(path, ObjectPath):
        fetched = get(path)
        if fetched is None:
            raise FileNotFoundError(f"{path}: no such object in the store")
        return fetched.data
    return Path(path).read_bytes()


def _suffixes(name: str) -> str:
    """The archive suffixes of name (.pgn.zst ...), so readers that go by the suffix still can."""
    lower = name.lower()
    for s in (".pgn.zst", ".pgn.zstd", ".pgn.bz2", ".pgn.gz", ".pgn", ".parquet", ".json"):
        if lower.endswith(s):
            return name[-len(s) :]
    return ""
