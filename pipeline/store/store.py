"""The store: one root (a folder, or an S3 prefix) holding archives, Parquet tables, DuckDB and Dagster.

Layout (the store contract, every table with its columns: docs/STORE.md; the schemas:
pipeline/store/schemas.py):

    <root>/archives/                 archive files (or links to them); one partition each
    <root>/games/archive=<key>/data.parquet
    <root>/rejected_games/archive=<key>/data.parquet
    <root>/positions/archive=<key>/data.parquet
    <root>/<table>/archive=<key>/data-0001.parquet, ...   further parts of an archive of more than
                                     IngestConfig.part_positions positions (pipeline/ingest/ingest.py)
    <root>/chess.duckdb              views over the Parquet
    <root>/dagster/                  Dagster instance (unless DAGSTER_HOME is set)

This module: the layout (where each table, the DuckDB file and the Dagster instance lie),
leases and partition locks, and the clean-up of what dead writers left. Beside it:
pipeline/store/store_archives.py (archives and their partition keys, Store's archive methods) and
pipeline/store/store_files.py (atomic writes: a temporary name renamed into place, so a killed run
never leaves a half-written file under a name readers glob; flocks; a full disk in one line).

The root may also be `s3://bucket/prefix` (storage.py: settings, atomic uploads;
storage_leases.py: leases); the DuckDB file and the Dagster instance of such a store stay in
a local folder (`Store.local_dir`), and partition locks are leases on S3 instead of flocks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.store import storage
from pipeline.store.storage import remove_stale_tmp
from pipeline.store.storage_leases import Lease, s3_lease
from pipeline.store.storage_paths import ObjectPath, StorePath
from pipeline.store.store_archives import ArchiveIndex, partition_key
from pipeline.store.store_files import STALE_COPY_S, file_lock

DATA_FILE = "data.parquet"
_PART_FILE = re.compile(r"^data(?:-(\d{4,}))?\.parquet$")
PARTITION_LEASE_TTL_S = 120.0
"""Lease time of an S3 store's partition writer (renewed every third of it while it writes)."""


def default_root(environ: Mapping[str, str] | None = None) -> StorePath:
    """Store root from CHESS_PIPELINE_HOME (a folder or s3://bucket/prefix), else ./store
    (resolved when called, not at import)."""
    env = os.environ if environ is None else environ
    return storage.parse_root(env.get("CHESS_PIPELINE_HOME") or "store")


def store_root(given: str | os.PathLike | None) -> StorePath:
    """The root a command was given (--home), else default_root()."""
    return storage.parse_root(given) if given else default_root()


@dataclass(frozen=True)
class Store(ArchiveIndex):
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

    def partition_file(self, table: str, key: str, part: int = 0) -> StorePath:
        """The file of one part of a partition: data.parquet, then data-0001.parquet, ..."""
        return self.partition_dir(table, key) / (DATA_FILE if part == 0 else f"data-{part:04d}.parquet")

    def partition_parts(self, table: str, key: str) -> list[tuple[int, StorePath]]:
        """A partition's part files as (part, path), in part order (temporary files are not parts)."""
        parts = []
        for path in storage.list_files(self.partition_dir(table, key), ".parquet"):
            m = _PART_FILE.match(path.name)
            if m:
                parts.append((int(m.group(1) or 0), path))
        return sorted(parts, key=lambda p: p[0])

    def partition_files(self, table: str, key: str) -> list[StorePath]:
        """A partition's part files, in part order."""
        return [path for _, path in self.partition_parts(table, key)]

    def remove_parts(self, table: str, key: str, first: int) -> None:
        """Remove a partition's part files from part `first` on (its writer's lock held)."""
        for part, path in self.partition_parts(table, key):
            if part >= first:
                storage.remove(path)

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
        and taken over by another worker once ttl_s passed without renewal (storage_leases.s3_lease).
        wait: block until it is free (on_wait is told once), else yield a false Lease at once."""
        if isinstance(self.root, ObjectPath):
            with s3_lease(self.root, name, ttl_s, wait=wait, on_wait=on_wait, poll_s=poll_s) as lease:
                yield lease
            return
        path = self.locks_dir / "leases" / f"{partition_key(name)}.lock"
        with file_lock(path, wait=wait, on_wait=on_wait, what=name) as held:
            yield Lease(name, held)

    @property
    def locks_dir(self) -> Path:
        """flock files (local to this machine; an S3 store's cross-machine locks are leases)."""
        return self.local_dir / ".locks"

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
