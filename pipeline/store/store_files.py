"""Files of the store written whole or not at all, the locks of its writers, and a full disk.

Every file is written to a temporary name in its final directory and renamed into place
(atomic_path; on S3 a spool file uploaded in one piece, pipeline/store/storage.py), so a killed run
never leaves a half-written file under a name readers glob. The writer holds an flock on its
temporary file, so a dead writer's file can be told from a live one's (storage.remove_stale_tmp).
file_lock is the flock every local lock of the store is. A full disk is reported in one line
(NoSpaceError, no_space_error).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.store import storage
from pipeline.store.storage import TMP_SUFFIX
from pipeline.store.storage_paths import ObjectPath, StorePath

PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9, "use_dictionary": True}


NAME_MAX = 255


TMP_NAME_MAX = 200
"""Bytes of the destination's name kept in a temporary name (the rest is .<random>.tmp)."""
STALE_COPY_S = 60.0
"""A temporary file younger than this is never taken for stale (made a moment ago, not locked yet)."""


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
    """Streams record batches into a Parquet file that appears only on commit.

    bloom: column -> false-positive rate of a Bloom filter on that column in every row group
    (readers then skip the row groups an equality or IN filter cannot match). The filter's size
    is fixed when the file is opened, so the file is opened at the first write and each
    filter is sized for as many distinct values as that write has rows: callers write one row
    group a call, of about the same size."""

    def __init__(
        self,
        dest: StorePath,
        schema: pa.Schema,
        options: Mapping | None = None,
        bloom: Mapping[str, float] | None = None,
    ):
        self.dest = dest if isinstance(dest, ObjectPath) else Path(dest)
        self.schema = schema
        self.options = dict(PARQUET_OPTIONS if options is None else options)
        self.bloom = dict(bloom or {})
        self._ctx = atomic_path(self.dest)
        self._tmp = self._ctx.__enter__()
        self._writer: pq.ParquetWriter | None = None
        try:
            if not self.bloom:
                self._open(0)
        except BaseException as e:
            self._ctx.__exit__(type(e), e, None)
            raise
        self._closed = False
        self.rows = 0

    def _open(self, rows: int) -> pq.ParquetWriter:
        filters = {c: {"ndv": rows, "fpp": fpp} for c, fpp in self.bloom.items()} if rows else None
        self._writer = pq.ParquetWriter(self._tmp, self.schema, **self.options, bloom_filter_options=filters)
        return self._writer

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            writer = self._writer or self._open(table.num_rows)
            writer.write_table(table, row_group_size=1 << 20)
            self.rows += table.num_rows

    def close(self) -> None:
        """Finish the file under its temporary name (the footer is written here)."""
        if not self._closed:
            self._closed = True
            (self._writer or self._open(0)).close()

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
