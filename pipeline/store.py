"""The store: one root (a folder, or an S3 prefix) holding archives, Parquet tables, DuckDB and Dagster.

Layout (the store contract, every table with its columns: docs/STORE.md; the schemas:
pipeline/schemas.py):

    <root>/archives/                 archive files (or links to them); one partition each
    <root>/games/archive=<key>/data.parquet
    <root>/rejected_games/archive=<key>/data.parquet
    <root>/positions/archive=<key>/data.parquet
    <root>/chess.duckdb              views over the Parquet
    <root>/dagster/                  Dagster instance (unless DAGSTER_HOME is set)

Every file is written to a temporary name in its final directory and renamed into
place, so a killed run never leaves a half-written file under a name readers glob.

The root may also be `s3://bucket/prefix` (pipeline/storage.py: settings, atomic uploads,
leases); the DuckDB file and the Dagster instance of such a store stay in a local folder
(`Store.local_dir`), and partition locks are leases on S3 instead of flocks.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.storage import TMP_SUFFIX, Lease, ObjectPath, StorePath, remove_stale_tmp

ARCHIVE_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.zstd", ".pgn.bz2", ".pgn.gz")
DATA_FILE = "data.parquet"
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9, "use_dictionary": True}

ARCHIVE_INDEX = "archive_index.json"
NAME_MAX = 255
TMP_NAME_MAX = 200
"""Bytes of the destination's name kept in a temporary name (the rest is .<random>.tmp)."""
STALE_COPY_S = 60.0
ADD_LEASE_TTL_S = 60.0
"""Lease time of an S3 store's archive adder and index writer (renewed while held)."""
PARTITION_LEASE_TTL_S = 120.0
"""Lease time of an S3 store's partition writer (renewed every third of it while it writes)."""
INDEX_ATTEMPTS = 5
"""A temporary file in the archives folder younger than this is never taken for stale."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_KEY = 120


def default_root(environ: Mapping[str, str] | None = None) -> StorePath:
    """Store root from CHESS_PIPELINE_HOME (a folder or s3://bucket/prefix), else ./store
    (resolved when called, not at import)."""
    env = os.environ if environ is None else environ
    return storage.parse_root(env.get("CHESS_PIPELINE_HOME") or "store")


def store_root(given: str | os.PathLike | None) -> StorePath:
    """The root a command was given (--home), else default_root()."""
    return storage.parse_root(given) if given else default_root()


def is_archive_name(name: str) -> bool:
    lower = name.lower()
    return not name.startswith(".") and lower.endswith(ARCHIVE_SUFFIXES)


def partition_key(relative_path: str) -> str:
    """Dagster partition key for an archive, from its path relative to the archives folder.

    Keys keep the file name where it is already safe ([A-Za-z0-9._-], no '..'), so the UI
    shows recognisable names; any other name is cleaned and suffixed with a hash of the
    exact path, so two different files never share a key and no key can name a path.
    """
    rel = relative_path.replace(os.sep, "/")
    key = rel.replace("/", "__")
    clean = _SAFE.sub("_", key)
    clean = re.sub(r"\.{2,}", ".", clean).strip(".")
    if clean != rel or len(clean) > MAX_KEY or not clean:
        digest = hashlib.sha1(rel.encode("utf-8", "surrogateescape")).hexdigest()[:10]
        clean = f"{clean[:MAX_KEY]}-{digest}"
    return clean


@dataclass(frozen=True)
class Store:
    root: StorePath
    """A folder (Path), or an S3 prefix (ObjectPath; a str `s3://...` is parsed into one)."""

    def __post_init__(self) -> None:
        if isinstance(self.root, str) and "://" in self.root:
            object.__setattr__(self, "root", storage.parse_root(self.root))
        elif not isinstance(self.root, (Path, ObjectPath)):
            object.__setattr__(self, "root", Path(self.root))

    @property
    def remote(self) -> bool:
        """Whether the store lives on object storage (S3)."""
        return isinstance(self.root, ObjectPath)

    @property
    def local_dir(self) -> Path:
        """The folder for what must stay on this machine: the root itself for a local store,
        a cache folder for an S3 store (storage.local_cache_dir)."""
        return storage.local_cache_dir(self.root) if isinstance(self.root, ObjectPath) else self.root

    @property
    def archives_dir(self) -> StorePath:
        return self.root / "archives"

    @property
    def duckdb_path(self) -> Path:
        return self.local_dir / "chess.duckdb"

    @property
    def dagster_home(self) -> Path:
        return self.local_dir / "dagster"

    def partition_dir(self, table: str, key: str) -> StorePath:
        return self.root / table / f"archive={key}"

    def partition_file(self, table: str, key: str) -> StorePath:
        return self.partition_dir(table, key) / DATA_FILE

    def table_glob(self, table: str) -> str:
        return str(self.root / table / "archive=*" / "*.parquet")

    def remove_dead_writers_tmp(self, tables: Iterable[str]) -> int:
        """Remove the temporary files that killed writers left in any partition of these tables.

        A live writer holds an flock on its temporary file (atomic_path), so its file stays; one
        younger than STALE_COPY_S stays too (made a moment ago, not locked yet). An S3 store's
        temporary files are local spool files, cleared where they are made."""
        if self.remote:
            return 0
        removed = 0
        for table in tables:
            folder = self.root / table
            if folder.is_dir():
                for partition in folder.glob("archive=*"):
                    removed += remove_stale_tmp(partition, min_age_s=STALE_COPY_S)
        return removed

    def ensure(self) -> Store:
        """Create a local store's folders; for an S3 store, check that the endpoint answers, takes
        the credentials and has the bucket (StoreUnavailable, one line, otherwise; nothing is written)."""
        if isinstance(self.root, ObjectPath):
            storage.check_bucket(self.root)
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        self.archives_dir.mkdir(parents=True, exist_ok=True)
        return self

    def is_new(self) -> bool:
        """No store here yet (no archives folder; on S3, no object under the root)."""
        if isinstance(self.root, ObjectPath):
            return next(storage.list_objects(self.root), None) is None
        return not self.archives_dir.is_dir()

    @contextmanager
    def lease(
        self,
        name: str,
        ttl_s: float,
        wait: bool = False,
        on_wait: Callable[[str], None] | None = None,
        poll_s: float = 1.0,
    ) -> Iterator[Lease]:
        """Exclusive work on `name` across processes and machines; yields a Lease, true if held.

        Local store: an flock on <root>/.locks/leases/<name>.lock (the kernel drops it when
        the holder exits; ttl_s is not needed). S3 store: a lease object renewed every ttl_s/3
        and taken over by another worker once ttl_s passed without renewal (storage.s3_lease).
        wait: block until it is free (on_wait is told once), else yield a false Lease at once."""
        if isinstance(self.root, ObjectPath):
            with storage.s3_lease(self.root, name, ttl_s, wait=wait, on_wait=on_wait, poll_s=poll_s) as lease:
                yield lease
            return
        path = self.locks_dir / "leases" / f"{partition_key(name)}.lock"
        with file_lock(path, wait=wait, on_wait=on_wait, what=name) as held:
            yield Lease(name, held)

    # Archives -----------------------------------------------------------------
    #
    # An archive is identified by its name and by its content (sha256): its partition key
    # comes from its path the first time it is seen, and the index (<root>/archive_index.json)
    # binds that key to the file's content. A file whose key is known stays that partition
    # (a changed file under the same name is the same partition, changed); a file with a new
    # name but the content of a known archive is that archive (a duplicate, or a rename);
    # only new content under a new name is a new partition.

    @property
    def index_path(self) -> StorePath:
        return self.root / ARCHIVE_INDEX

    @property
    def locks_dir(self) -> Path:
        """flock files (local to this machine; an S3 store's cross-machine locks are leases)."""
        return self.local_dir / ".locks"

    def _archive_files(self) -> tuple[list[tuple[str, StorePath, list]], list[Path]]:
        """(relative name, path, signature) of every archive file, and the dangling links."""
        if isinstance(self.archives_dir, ObjectPath):
            top = self.archives_dir
            files = []
            for obj in storage.list_objects(top):
                path = ObjectPath(top.bucket, obj["Key"])
                rel = path.relative_to(top).as_posix()
                if is_archive_name(path.name) and not any(part.startswith(".") for part in rel.split("/")):
                    files.append((rel, path, [obj["Size"], obj["ETag"].strip('"')]))
            return files, []
        files, dangling = _walk_archives(self.archives_dir)
        return [(rel, path, _signature(st)) for rel, path, st in files], dangling

    def _read_index(self) -> tuple[dict, str | None]:
        """The archive index and (S3) its ETag, for a conditional write back."""
        if isinstance(self.index_path, ObjectPath):
            fetched = storage.get(self.index_path)
            if fetched is None:
                return {}, None
            try:
                return json.loads(fetched.data), fetched.etag
            except ValueError:
                return {}, fetched.etag
        return read_json(self.index_path), None

    def _write_index(self, index: dict, etag: str | None) -> None:
        """Locally: atomically (under the index lock). On S3: a PUT conditional on the object being
        the one read (If-Match its ETag, If-None-Match when there was none): PreconditionFailed
        when another writer changed it since."""
        if isinstance(self.index_path, ObjectPath):
            data = json.dumps(index, indent=1, sort_keys=True).encode()
            if etag:
                storage.put(self.index_path, data, if_match=etag)
            else:
                storage.put(self.index_path, data, if_none_match=True)
        else:
            write_json(self.index_path, index)

    def scan_archives(self, hash_budget_s: float | None = None) -> ArchiveScan:
        """Walk the archives folder once (links followed, loops cut, each real file once),
        hash new or changed files, and map every file to its partition key.

        hash_budget_s: stop starting new hashes after this long (sha256 reads ~280 MB/s here);
        the files left unhashed are left out of this scan (`unhashed` counts them) and hashed by
        a later one, the hashes already made being kept. The sensor uses it to finish its tick."""
        files, dangling = self._archive_files()
        if not files and not dangling:
            return ArchiveScan({}, {}, {}, dangling)
        old, _ = self._read_index()
        cache = old.get("files", {})
        hashed: dict[str, tuple[list, str]] = {}
        deadline = None if hash_budget_s is None else time.monotonic() + hash_budget_s
        unhashed = 0
        for rel, path, sig in files:
            entry = cache.get(rel)
            if entry and entry.get("sig") == sig:
                hashed[rel] = (sig, entry["sha256"])
            elif deadline is not None and time.monotonic() > deadline:
                unhashed += 1
            else:
                try:
                    hashed[rel] = (sig, file_sha256(path))
                except OSError:
                    continue  # vanished or unreadable: the next scan sees it again
        for _attempt in range(INDEX_ATTEMPTS):
            try:
                return self._map_archives(files, dangling, hashed, old, unhashed)
            except storage.PreconditionFailed:
                continue  # another writer changed the S3 index since we read it: map again
        raise RuntimeError(
            f"{self.index_path}: changed by other writers {INDEX_ATTEMPTS} times while this scan "
            "wrote it; run the command again"
        )

    def _map_archives(self, files, dangling, hashed, old, unhashed) -> ArchiveScan:
        with self._index_lock():
            index, etag = self._read_index()
            keys: dict[str, dict] = index.setdefault("keys", {})
            archives: dict[str, Path] = {}
            hashes: dict[str, str] = {}
            duplicates: dict[Path, str] = {}
            present = [(rel, path, hashed[rel][1]) for rel, path, _ in files if rel in hashed]
            # A file under a known key is that partition, whatever its content now.
            rest = []
            for rel, path, digest in present:
                key = partition_key(rel)
                if key in keys:
                    archives[key], hashes[key] = path, digest
                else:
                    rest.append((rel, path, digest))
            by_hash = {digest: key for key, digest in reversed(hashes.items())}
            for key, entry in keys.items():
                by_hash.setdefault(entry["sha256"], key)
            # A new name: known content is that archive (a duplicate while the archive's own
            # file is there, else the archive moved); new content is a new partition.
            for rel, path, digest in rest:
                known = by_hash.get(digest)
                if known in archives and hashes[known] == digest:
                    duplicates[path] = known
                    continue
                key = known if known is not None and known not in archives else partition_key(rel)
                archives[key], hashes[key] = path, digest
                by_hash[digest] = key
            for key, path in archives.items():
                keys[key] = {"sha256": hashes[key], "path": path.relative_to(self.archives_dir).as_posix()}
            index["files"] = {rel: {"sig": sig, "sha256": h} for rel, (sig, h) in hashed.items()}
            if index != old:
                self._write_index(index, etag)
        return ArchiveScan(archives, hashes, duplicates, dangling, unhashed)

    def find_archives(self) -> dict[str, Path]:
        """Every distinct archive under the archives folder (recursively), by partition key."""
        return self.scan_archives().archives

    def archive_path(self, key: str, scan: ArchiveScan | None = None) -> StorePath:
        """The file of partition `key`; `scan`: a scan_archives() the caller has already made."""
        scan = scan or self.scan_archives()
        path = scan.archives.get(key)
        if path is None:
            links = [str(p) for p in scan.dangling if partition_key(p.relative_to(self.archives_dir).as_posix()) == key]
            if links:
                raise FileNotFoundError(
                    f"archive {key}: {links[0]} is a link to {os.readlink(links[0])}, which "
                    "does not exist; link it again or remove the link"
                )
            raise FileNotFoundError(
                f"no archive with partition key {key!r} under {self.archives_dir}; "
                "was the file moved or deleted? Put it back or remove the partition"
            )
        return path

    @contextmanager
    def local_archive(self, key: str) -> Iterator[Path]:
        """The archive of partition `key` as a local file: its own path in a local store, a
        downloaded copy (removed afterwards) in an S3 store."""
        path = self.archive_path(key)
        if isinstance(path, ObjectPath):
            with storage.local_copy(path) as local:
                yield local
        else:
            yield path

    def add_archive(self, source: Path, copy: bool = False) -> str:
        """Put an archive into the archives folder (a symlink unless copy) and return its key.

        A file already inside the archives folder is used where it is. Content already in
        the store (the same file, or the same bytes under any name) is that archive's key and
        adds nothing. A different file with a name already taken gets a numbered name. A copy
        is written under a temporary name and renamed into place, so a killed copy leaves no
        archive behind (and its temporary file is removed by a later call).
        """
        given = Path(source).expanduser().absolute()
        real = given.resolve()
        if not real.is_file():
            raise FileNotFoundError(f"archive {given} does not exist or is not a file")
        name = given.name if is_archive_name(given.name) else real.name
        if not is_archive_name(name):
            raise ArchiveNameError(f"{given.name}: not an archive name (expected one of {', '.join(ARCHIVE_SUFFIXES)})")
        self.ensure()
        if isinstance(self.archives_dir, ObjectPath):
            return self._add_archive_remote(real, name)
        archives = self.archives_dir.absolute()
        for candidate in (given, real):
            if archives in candidate.parents or self.archives_dir.resolve() in candidate.parents:
                scan = self.scan_archives()
                for key, path in scan.archives.items():
                    if _same_file(path, candidate):
                        return key
                for path, key in scan.duplicates.items():
                    if _same_file(path, candidate):
                        return key
        remove_stale_tmp(self.archives_dir, min_age_s=STALE_COPY_S)
        digest = file_sha256(real)
        with self._archive_add_lock():
            if (known := self.scan_archives().key_with_hash(digest)) is not None:
                return known
            target = self._free_archive_path(self.archives_dir, name)
            try:
                if copy:
                    with atomic_path(target) as tmp:
                        shutil.copyfile(real, tmp)
                else:
                    target.symlink_to(real)
            except OSError as e:
                raise_if_no_space(e, target)
                raise
            # Registered only now, with its final name in place.
            return self.scan_archives().key_at(target)

    def _add_archive_remote(self, real: Path, name: str) -> str:
        """add_archive for an S3 store: the file is uploaded (atomically: the object appears
        whole or not at all) into archives/, with its sha256 as object metadata; the index
        object is written conditionally (see _write_index)."""
        digest = file_sha256(real)
        with self._archive_add_lock():
            if (known := self.scan_archives().key_with_hash(digest)) is not None:
                return known
            target = self._free_archive_path(self.archives_dir, name)
            storage.upload_file(real, target, metadata={"sha256": digest})
            return self.scan_archives().key_at(target)

    def add_archive_data(self, data: bytes, relative: str) -> tuple[str, StorePath]:
        """An archive the pipeline writes itself (self-play's generations): `data` as the file
        `relative` (a path under the archives folder, e.g. selfplay/<line>/gen-0001.pgn), through
        add_archive's checks: the same bytes already in the store are that archive's key and add
        nothing; a name already taken gets a numbered name (never written over: an ingested
        archive keeps its bytes). Written whole (a local file renamed into place; on S3 one
        object with its sha256 as metadata). Its partition key and where it was written."""
        parts = [p for p in relative.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise ValueError(f"{relative!r}: not a path under the archives folder")
        if not is_archive_name(parts[-1]):
            raise ArchiveNameError(f"{parts[-1]}: not an archive name (expected one of {', '.join(ARCHIVE_SUFFIXES)})")
        self.ensure()
        folder = self.archives_dir
        for part in parts[:-1]:
            folder = folder / part
        digest = hashlib.sha256(data).hexdigest()
        with self._archive_add_lock():
            scan = self.scan_archives()
            if (known := scan.key_with_hash(digest)) is not None:
                return known, scan.archives[known]
            target = self._free_archive_path(folder, parts[-1])
            if self.remote:
                with storage.atomic_upload(target, metadata={"sha256": digest}) as tmp:
                    tmp.write_bytes(data)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with atomic_path(target) as tmp:
                        Path(tmp).write_bytes(data)
                except OSError as e:
                    raise_if_no_space(e, target)
                    raise
            return self.scan_archives().key_at(target), target

    @contextmanager
    def _archive_add_lock(self):
        """One adder at a time, on every machine, from the content check to the registration: two
        adds of different files under one name must not both take it (a rename or a second PUT
        would put one over the other), nor two adds of the same bytes make two archives."""
        if self.remote:
            with self.lease("archive_add", ADD_LEASE_TTL_S, wait=True):
                yield
            return
        with file_lock(self.locks_dir / "archive_add.lock"):
            yield

    def _free_archive_path(self, folder: StorePath, name: str) -> StorePath:
        """folder/name, or the first numbered name (stem-1.pgn, ...) not taken there."""
        stem, suffix = _split_suffix(name)
        n = 0
        while True:
            target = folder / (name if n == 0 else _numbered(stem, n, suffix))
            taken = storage.head(target) is not None if self.remote else target.is_symlink() or target.exists()
            if not taken:
                return target
            n += 1

    # Locks ------------------------------------------------------------------------

    @contextmanager
    def _index_lock(self):
        if self.remote:  # the index object is also written conditionally (_write_index)
            with self.lease("archive_index", ADD_LEASE_TTL_S, wait=True, poll_s=0.2):
                yield
            return
        with file_lock(self.locks_dir / "archive_index.lock"):
            yield

    @contextmanager
    def partition_lock(self, key: str, on_wait: Callable[[str], None] | None = None):
        """Hold the write lock of one archive partition (all its tables) while writing it.

        flock on a file under <root>/.locks: the kernel drops it when the holder exits, however
        it exits. A second writer of the same partition waits for the first (on_wait gets a
        message saying so) and then writes it again. While the lock is held, no other run
        writes the partition, so temporary files found in it are stale and may go.

        Yields a Lease: on an S3 store a lease object (no flock there), whose `check()` the
        writer calls before it commits, so a writer that lost it commits nothing."""
        if self.remote:  # no flock on object storage: a lease, waited for
            with self.lease(f"partition-{key}", PARTITION_LEASE_TTL_S, wait=True, on_wait=on_wait) as lease:
                yield lease
            return
        path = self.locks_dir / "partitions" / f"{key}.lock"
        with file_lock(path, on_wait=on_wait, what=f"partition {key}") as held:
            yield Lease(f"partition {key}", held)


@dataclass(frozen=True)
class ArchiveScan:
    archives: dict[str, Path]
    """One path per partition key."""
    hashes: dict[str, str]
    """sha256 of each partition's file."""
    duplicates: dict[Path, str]
    """Files whose content is another partition's: path -> that partition's key."""
    dangling: list[Path]
    """Links in the archives folder whose target is missing."""
    unhashed: int = 0
    """New or changed files left for a later scan (the hashing time budget ran out)."""

    def key_with_hash(self, digest: str) -> str | None:
        """The partition whose file has this sha256, if any."""
        return next((key for key, h in self.hashes.items() if h == digest), None)

    def key_at(self, path: Path) -> str:
        """The partition key of the file at path (a partition's own, or the one it duplicates)."""
        for key, p in self.archives.items():
            if p == path:
                return key
        return self.duplicates[path]


class ArchiveNameError(ValueError):
    pass


def file_sha256(path: StorePath) -> str:
    """sha256 of a file; of an S3 object, the sha256 its uploader recorded (add_archive), else
    of its bytes, downloaded."""
    if isinstance(path, ObjectPath):
        meta = storage.head(path)
        if meta is None:
            raise FileNotFoundError(f"{path}: no such object")
        if meta.get("Metadata", {}).get("sha256"):
            return meta["Metadata"]["sha256"]
        with storage.local_copy(path) as local:
            return file_sha256(local)
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _signature(st: os.stat_result) -> list:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _walk_archives(top: Path) -> tuple[list[tuple[str, Path, os.stat_result]], list[Path]]:
    """Archive files under top, breadth first in name order, links followed.

    Each directory is entered once (by device and inode), so a link loop such as
    `ln -s . loop` adds nothing; each real file is listed once, under its shortest path."""
    files: list[tuple[str, Path, os.stat_result]] = []
    dangling: list[Path] = []
    try:
        root_st = top.stat()
    except OSError:
        return files, dangling
    seen_dirs = {(root_st.st_dev, root_st.st_ino)}
    seen_files: set[tuple[int, int]] = set()
    queue: deque[Path] = deque([top])
    while queue:
        d = queue.popleft()
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if name.startswith("."):
                continue
            path = d / name
            try:
                st = path.stat()
            except OSError:
                if path.is_symlink() and is_archive_name(name):
                    dangling.append(path)
                continue
            ident = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                if ident not in seen_dirs:
                    seen_dirs.add(ident)
                    queue.append(path)
            elif stat.S_ISREG(st.st_mode) and is_archive_name(name) and ident not in seen_files:
                seen_files.add(ident)
                files.append((path.relative_to(top).as_posix(), path, st))
    return files, dangling


def read_json(path: StorePath) -> dict:
    """The JSON object at `path` (a file or an S3 object); {} when absent or unreadable."""
    try:
        data = json.loads(storage.read_bytes(path))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: StorePath, data: dict) -> None:
    """Write `data` as JSON at `path` (a file or an S3 object) atomically; a full disk says so in one line."""
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    except OSError as e:
        raise_if_no_space(e, path)
        raise


@contextmanager
def file_lock(
    path: Path, wait: bool = True, on_wait: Callable[[str], None] | None = None, what: str = ""
) -> Iterator[bool]:
    """An exclusive flock on path (created if needed); yields whether this process holds it.

    wait: block until another holder lets go (on_wait gets a message naming its pid first),
    else yield False at once. The kernel drops the lock when the holder exits, however it
    exits. The file holds the holder's pid, for the message a waiter gets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            if on_wait is not None:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                on_wait(f"{what} is being written by another run (pid {holder}); waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield True
    finally:
        os.close(fd)  # closing drops the lock


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_time(pid: int) -> float | None:
    """When the process with this pid started (seconds since the epoch), or None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counting from the state (field 3)
        boot = next(
            float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


_PROGRESS = re.compile(r"^\.progress-(\d+)\.json$")


def remove_stale_progress_files(store: Store) -> int:
    """Remove the CLI's progress files (<local_dir>/<folder>/.progress-<pid>.json) whose process is gone."""
    removed = 0
    if not store.local_dir.is_dir():
        return removed
    for folder in store.local_dir.iterdir():
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        for p in folder.glob(".progress-*.json"):
            m = _PROGRESS.match(p.name)
            if m and not pid_alive(int(m.group(1))):
                p.unlink(missing_ok=True)
                removed += 1
        remove_stale_tmp(folder, min_age_s=STALE_COPY_S, prefix=".progress-")
    return removed


# Disk full ------------------------------------------------------------------------


class NoSpaceError(OSError):
    """A write failed because the file system is full; the message names it, in one line."""

    def __str__(self) -> str:
        return self.strerror or "no space left on device"


def is_no_space(e: BaseException) -> bool:
    """ENOSPC or EDQUOT, however the library reporting it wrapped it (pyarrow puts the
    errno in its message; sqlite says "database or disk is full")."""
    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(e)
        if "No space left on device" in text or "Disk quota exceeded" in text or "database or disk is full" in text:
            return True
        e = e.__cause__ or e.__context__
    return False


def mount_point(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists():
        p = p.parent
    while not os.path.ismount(p):
        p = p.parent
    return p


def no_space_message(path: Path) -> str:
    return (
        f"no space left on {mount_point(path)} (writing {path}); nothing was half written: "
        "free some space and run the command again"
    )


FULL_MARGIN = 1 << 20
"""A file system with less than this free counts as full when a library reports only an I/O error."""


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(mount_point(path))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def no_space_error(e: BaseException, paths: list[Path]) -> str | None:
    """The one-line "no space left on ..." message for an error a full disk caused, else None.

    SQLite (the Dagster instance) may report a full disk only as "disk I/O error": such an
    error counts when one of paths lies on a file system with (almost) no space left."""
    chain, err = [], e
    while err is not None and len(chain) < 20:
        chain.append(err)
        err = err.__cause__ or err.__context__
    for err in chain:
        if isinstance(err, NoSpaceError):
            return str(err)
    full = [p for p in paths if (free := _free_bytes(p)) is not None and free < FULL_MARGIN]
    if is_no_space(e):
        return no_space_message(full[0] if full else paths[0])
    if full and any("disk I/O error" in str(err) for err in chain):
        return no_space_message(full[0])
    return None


def raise_if_no_space(e: BaseException, path: StorePath) -> None:
    if isinstance(path, ObjectPath):
        path = storage.cache_root()  # what fills up is the local spool of the upload
    if is_no_space(e) and not isinstance(e, NoSpaceError):
        raise NoSpaceError(errno.ENOSPC, no_space_message(path)) from None  # the message says it all


def _numbered(stem: str, n: int, suffix: str) -> str:
    """stem-n.suffix, with the stem shortened so the name fits in NAME_MAX bytes."""
    tail = f"-{n}{suffix}"
    room = NAME_MAX - len(os.fsencode(tail))
    while len(os.fsencode(stem)) > room:
        stem = stem[:-1]
    return stem + tail


def _split_suffix(name: str) -> tuple[str, str]:
    lower = name.lower()
    for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)], name[-len(suffix) :]
    return name, ""


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _file_mode() -> int:
    """0666 less the process umask: the mode open() would have given the file."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_path(dest: StorePath):
    """Yield a temporary path beside dest; on success it is renamed onto dest.

    dest on S3 (an ObjectPath): the temporary path is a local spool file, uploaded as dest
    when the block ends without an exception (storage.atomic_upload: the object appears whole
    or not at all).

    The temporary name is .<name>.<random>.tmp, with the name shortened so that it fits in
    NAME_MAX bytes however long dest's name is. The writer holds an flock on the temporary
    file until it is renamed (or removed), so remove_stale_tmp can tell a dead writer's file
    from a live one's."""
    if isinstance(dest, ObjectPath):
        with storage.atomic_upload(dest) as tmp:
            yield tmp
        return
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{_shorten(dest.name, TMP_NAME_MAX)}.", suffix=TMP_SUFFIX, dir=dest.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield Path(tmp)
        os.chmod(tmp, _file_mode())  # mkstemp's 0600 would hide the store from other readers
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)  # drops the lock


def write_parquet(path: StorePath, table: pa.Table, row_group_size: int | None = None) -> StorePath:
    """One whole table to path with the store's Parquet options, atomically (atomic_path)."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, row_group_size=row_group_size, **PARQUET_OPTIONS)
    return path


def _shorten(name: str, limit: int) -> str:
    while len(os.fsencode(name)) > limit:
        name = name[:-1]
    return name


class AtomicParquetWriter:
    """Streams record batches into a Parquet file that appears only on commit."""

    def __init__(self, dest: StorePath, schema: pa.Schema, options: Mapping | None = None):
        self.dest = dest if isinstance(dest, ObjectPath) else Path(dest)
        self.schema = schema
        self._ctx = atomic_path(self.dest)
        self._tmp = self._ctx.__enter__()
        try:
            self._writer = pq.ParquetWriter(self._tmp, schema, **(PARQUET_OPTIONS if options is None else options))
        except BaseException as e:
            self._ctx.__exit__(type(e), e, None)
            raise
        self._closed = False
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table, row_group_size=1 << 20)
            self.rows += table.num_rows

    def close(self) -> None:
        """Finish the file under its temporary name (the footer is written here)."""
        if not self._closed:
            self._closed = True
            self._writer.close()

    def commit(self) -> None:
        self.close()
        self._ctx.__exit__(None, None, None)

    def abort(self, exc: BaseException | None = None) -> None:
        """Remove the temporary file; never raises (a full disk may fail the close too)."""
        try:
            self.close()
        except BaseException:
            pass
        err = exc or RuntimeError("aborted")
        try:
            self._ctx.__exit__(type(err), err, None)
        except BaseException:
            pass
