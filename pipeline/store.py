"""The store: one root directory holding archives, Parquet tables, DuckDB and Dagster.

Layout (see ARCHITECTURE.md, "Store contract"):

    <root>/archives/                 archive files (or links to them); one partition each
    <root>/games/archive=<key>/data.parquet
    <root>/rejected_games/archive=<key>/data.parquet
    <root>/positions/archive=<key>/data.parquet
    <root>/chess.duckdb              views over the Parquet
    <root>/dagster/                  Dagster instance (unless DAGSTER_HOME is set)

Every file is written to a temporary name in its final directory and renamed into
place, so a killed run never leaves a half-written file under a name readers glob.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ARCHIVE_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.zstd", ".pgn.bz2", ".pgn.gz")
TMP_SUFFIX = ".tmp"
DATA_FILE = "data.parquet"
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9, "use_dictionary": True}

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_KEY = 120


def default_root(environ: Mapping[str, str] | None = None) -> Path:
    """Store root from CHESS_PIPELINE_HOME, else ./store (resolved when called, not at import)."""
    env = os.environ if environ is None else environ
    return Path(env.get("CHESS_PIPELINE_HOME") or "store").expanduser().resolve()


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
    root: Path

    @property
    def archives_dir(self) -> Path:
        return self.root / "archives"

    @property
    def duckdb_path(self) -> Path:
        return self.root / "chess.duckdb"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    def partition_dir(self, table: str, key: str) -> Path:
        return self.root / table / f"archive={key}"

    def partition_file(self, table: str, key: str) -> Path:
        return self.partition_dir(table, key) / DATA_FILE

    def table_glob(self, table: str) -> str:
        return str(self.root / table / "archive=*" / "*.parquet")

    def ensure(self) -> "Store":
        self.root.mkdir(parents=True, exist_ok=True)
        self.archives_dir.mkdir(parents=True, exist_ok=True)
        return self

    # Archives -----------------------------------------------------------------

    def find_archives(self) -> dict[str, Path]:
        """Every archive under the archives folder (recursively), by partition key."""
        found: dict[str, Path] = {}
        if not self.archives_dir.exists():
            return found
        for dirpath, dirnames, filenames in os.walk(self.archives_dir, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if is_archive_name(name):
                    path = Path(dirpath) / name
                    rel = path.relative_to(self.archives_dir).as_posix()
                    found[partition_key(rel)] = path
        return found

    def archive_path(self, key: str) -> Path:
        path = self.find_archives().get(key)
        if path is None:
            raise FileNotFoundError(
                f"no archive with partition key {key!r} under {self.archives_dir}; "
                "was the file moved or deleted? Put it back or remove the partition"
            )
        return path

    def add_archive(self, source: Path, copy: bool = False) -> str:
        """Put an archive into the archives folder (a symlink unless copy) and return its key.

        A file already inside the archives folder is used where it is. A different file
        with the same name gets a numbered name; the same file linked again is a no-op.
        """
        source = Path(source).expanduser().resolve()
        if not source.is_file():
            raise FileNotFoundError(f"archive {source} does not exist or is not a file")
        if not is_archive_name(source.name):
            raise ValueError(f"{source.name}: not an archive name (expected one of {', '.join(ARCHIVE_SUFFIXES)})")
        self.ensure()
        archives = self.archives_dir.resolve()
        if archives in source.parents:
            return partition_key(source.relative_to(archives).as_posix())
        stem, suffix = _split_suffix(source.name)
        n = 0
        while True:
            name = source.name if n == 0 else f"{stem}-{n}{suffix}"
            target = self.archives_dir / name
            if target.is_symlink() or target.exists():
                if target.resolve() == source or _same_file(target, source):
                    return partition_key(name)
                n += 1
                continue
            if copy:
                with atomic_path(target) as tmp:
                    shutil.copyfile(source, tmp)
            else:
                target.symlink_to(source)
            return partition_key(name)


def _split_suffix(name: str) -> tuple[str, str]:
    lower = name.lower()
    for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)], name[-len(suffix):]
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
def atomic_path(dest: Path):
    """Yield a temporary path beside dest; on success it is renamed onto dest."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TMP_SUFFIX, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _file_mode())  # mkstemp's 0600 would hide the store from other readers
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class AtomicParquetWriter:
    """Streams record batches into a Parquet file that appears only on commit."""

    def __init__(self, dest: Path, schema: pa.Schema, options: Mapping | None = None):
        self.dest = Path(dest)
        self.schema = schema
        self._ctx = atomic_path(self.dest)
        self._tmp = self._ctx.__enter__()
        self._writer = pq.ParquetWriter(self._tmp, schema, **(PARQUET_OPTIONS if options is None else options))
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table, row_group_size=1 << 20)
            self.rows += table.num_rows

    def commit(self) -> None:
        self._writer.close()
        self._ctx.__exit__(None, None, None)

    def abort(self, exc: BaseException | None = None) -> None:
        try:
            self._writer.close()
        finally:
            err = exc or RuntimeError("aborted")
            try:
                self._ctx.__exit__(type(err), err, None)
            except BaseException:
                pass
