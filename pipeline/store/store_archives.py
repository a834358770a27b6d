"""Archives and their partitions: which file is which Dagster partition, and adding files.

An archive is identified by its name and by its content (sha256): its partition key comes from
its path the first time it is seen, and the index (<root>/archive_index.json) binds that key to
the file's content. A file whose key is known stays that partition (a changed file under the
same name is the same partition, changed); a file with a new name but the content of a known
archive is that archive (a duplicate, or a rename); only new content under a new name is a new
partition.

`ArchiveIndex` holds these methods of `pipeline.store.store.Store` (its base class); the store's
layout, leases and locks are in pipeline/store/store.py, atomic writes in pipeline/store/store_files.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.store import storage
from pipeline.store.storage import remove_stale_tmp
from pipeline.store.storage_paths import ObjectPath, StorePath
from pipeline.store.store_files import (
    NAME_MAX,
    STALE_COPY_S,
    atomic_path,
    file_lock,
    raise_if_no_space,
    read_json,
    write_json,
)

ARCHIVE_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.zstd", ".pgn.bz2", ".pgn.gz")


ARCHIVE_INDEX = "archive_index.json"


ADD_LEASE_TTL_S = 60.0
"""Lease time of an S3 store's archive adder and index writer (renewed while held)."""
INDEX_ATTEMPTS = 5
"""Tries of a scan to write the S3 index when other writers keep changing it."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


MAX_KEY = 120


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


class ArchiveIndex:
    """The archive methods of Store (pipeline/store/store.py), which it inherits: they use its root,
    archives_dir, locks_dir, remote, ensure() and lease()."""

    @property
    def index_path(self) -> StorePath:
        return self.root / ARCHIVE_INDEX

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
        with storage.local_path(self.archive_path(key)) as local:
            yield local

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

    @contextmanager
    def _index_lock(self):
        if self.remote:  # the index object is also written conditionally (_write_index)
            with self.lease("archive_index", ADD_LEASE_TTL_S, wait=True, poll_s=0.2):
                yield
            return
        with file_lock(self.locks_dir / "archive_index.lock"):
            yield


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
