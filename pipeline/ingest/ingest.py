"""Archive -> games, rejected_games and positions Parquet, using every core."""

from __future__ import annotations

import io
import multiprocessing
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, islice
from pathlib import Path

import chess.pgn
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.archive import MAX_GAME_BYTES, ArchiveError, ArchiveNotes, RawGame, iter_raw_games, open_text
from pipeline.ingest.book import remove_book
from pipeline.ingest.games import GAMES_SCHEMA, POSITIONS_SCHEMA, REJECTED_SCHEMA, process_games
from pipeline.store import storage
from pipeline.store.storage import remove_stale_tmp
from pipeline.store.storage_leases import Lease
from pipeline.store.store import Store
from pipeline.store.store_files import AtomicParquetWriter, raise_if_no_space

TABLES = ("games", "rejected_games", "positions")
SCHEMAS = {"games": GAMES_SCHEMA, "rejected_games": REJECTED_SCHEMA, "positions": POSITIONS_SCHEMA}


def _write_options(table: str, level: int, plain: set[str]) -> dict:
    dictionary = [n for n in SCHEMAS[table].names if n not in plain]
    return {"compression": "zstd", "compression_level": level, "use_dictionary": dictionary}


# Writing is the ingest's serial part, so it is tuned for speed (benchmarks/ingest.py prints
# the sizes). On the FICS files zstd level 1 compresses the planes 6x faster than level 9, to
# 3.65 bytes per position against 3.22 (levels 3-4 are larger than 1 on this data).
# Dictionary encoding only costs time and bytes on columns whose values rarely repeat.
WRITE_OPTIONS = {
    "games": _write_options("games", 3, {"game_id", "moves_uci"}),
    "rejected_games": _write_options("rejected_games", 3, {"excerpt", "reason"}),
    "positions": _write_options("positions", 1, {"position_key", "planes"}),
}


# Bloom filters on the columns lookups match one value of: each positions row group's keys (a
# lookup by key, the explorer's /api/position and `WHERE position_key = ...` in SQL, reads only
# the row groups whose filter may hold the key, instead of every key of the store) and each
# games row group's ids (the explorer's 20 strongest games, /api/games/<id>). At 5% false
# positives a positions filter costs about 0.9 bytes a position (a row group of 2,000 games:
# 128 KiB; Arrow rounds the size up to a power of two). The explorer asks the games for 20 ids
# at once, so their filters are made tighter: at 5%, 163 of 346 row groups of a 50M-position
# store let one of 20 ids through; at 0.1% a filter is 4 KiB a row group. benchmarks/scale.py
# prints their bytes and the lookups' times. Arrow keeps a file's filters in memory until it
# closes the file, about 0.9 bytes a position: IngestConfig.part_positions bounds a file's
# positions, and so the writer's memory (docs/results/speed.md, "Scale").
BLOOM = {"positions": {"position_key": 0.05}, "games": {"game_id": 0.001}}


# Below this many games starting worker processes (about 0.3 s) costs more than they gain:
# the archive is parsed in the calling process.
POOL_MIN_GAMES = 2000


@dataclass(frozen=True)
class IngestConfig:
    """How one archive is ingested."""

    workers: int = 0
    """Worker processes; 0 means one per core. 1 parses in the calling process."""
    chunk_games: int = 2000
    """Games per Parquet row group. With batch_games it fixes the file's layout, so output
    files do not depend on the number of workers."""
    batch_games: int = 250
    """Games per unit of work sent to a worker: small enough to spread an archive of a few
    thousand games over every core; chunk_games must be a multiple of it."""
    part_positions: int = 32_000_000
    """Positions a part file holds at most (unless one chunk alone holds more): a larger archive
    goes on in data-0001.parquet, ..., each table's part i holding the same games. Arrow keeps a
    file's Bloom filters in memory until it closes it (BLOOM: about 0.9 bytes a position), so
    this bounds the writer's memory whatever the archive's size: about 30 MB of filters."""

    def __post_init__(self) -> None:
        if self.part_positions < 1:
            raise ValueError(f"part_positions ({self.part_positions}) must be positive")
        if self.batch_games < 1 or self.chunk_games < 1 or self.chunk_games % self.batch_games:
            raise ValueError(
                f"chunk_games ({self.chunk_games}) must be a positive multiple of batch_games ({self.batch_games})"
            )


@dataclass
class IngestStats:
    archive: str
    games: int = 0
    rejected: int = 0
    positions: int = 0
    seconds: float = 0.0
    parts: int = 0
    """Part files each table of the archive was written in (IngestConfig.part_positions)."""
    reject_reasons: Counter = field(default_factory=Counter)
    bytes: dict[str, int] = field(default_factory=dict)
    notes: ArchiveNotes = field(default_factory=ArchiveNotes)
    """What the archive reader noticed: warnings with line numbers (unclosed comments) and
    the games lost inside unclosed comments (complete once the archive is read)."""

    @property
    def plies(self) -> int:
        return self.positions - self.games

    @property
    def plies_per_second(self) -> float:
        return self.plies / self.seconds if self.seconds else 0.0

    @property
    def bytes_per_position(self) -> float:
        return self.bytes.get("positions", 0) / self.positions if self.positions else 0.0


Progress = Callable[[IngestStats], None]


def _chunks(games: Iterator[RawGame], size: int) -> Iterator[list[RawGame]]:
    while True:
        chunk = list(islice(games, size))
        if not chunk:
            return
        yield chunk


def _pool(workers: int) -> ProcessPoolExecutor:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pipeline.ingest.games"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def _start_workers(pool: ProcessPoolExecutor, workers: int) -> None:
    # While no worker is idle, each submit starts one more process (up to max_workers).
    for f in [pool.submit(int) for _ in range(workers)]:
        f.result()


def _finished(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


def _batch_results(
    path: Path, key: str, config: IngestConfig, notes: ArchiveNotes | None = None
) -> Iterator[tuple[pa.Table, pa.Table, pa.Table]]:
    """Processed batches in archive order, with at most 4 x workers batches in flight."""
    workers = config.workers or os.cpu_count() or 1
    batches = _chunks(iter_raw_games(path, notes), config.batch_games)
    enough = -(-POOL_MIN_GAMES // config.batch_games)
    head = list(islice(batches, enough))
    if workers == 1 or len(head) < enough:
        # A small archive (or one worker): a process pool would only add its start-up time.
        for batch in chain(head, batches):
            yield process_games(key, batch)
        return
    with _pool(workers) as pool, ThreadPoolExecutor(1) as starter:
        # Starting the workers takes about 0.3 s (the forkserver imports the pipeline); this
        # process works through the first batches itself meanwhile.
        started = starter.submit(_start_workers, pool, workers)
        pending: deque[Future] = deque()
        try:
            for batch in chain(head, batches):
                if started.done():
                    pending.append(pool.submit(process_games, key, batch))
                else:
                    pending.append(_finished(process_games(key, batch)))
                while len(pending) >= 4 * workers:
                    yield pending.popleft().result()
            started.result()
            while pending:
                yield pending.popleft().result()
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def _results(key: str, path: Path, config: IngestConfig, notes: ArchiveNotes | None = None) -> Iterator[list[pa.Table]]:
    """games, rejected_games and positions of each chunk_games games, in archive order."""
    per_chunk = config.chunk_games // config.batch_games
    parts: list[tuple[pa.Table, pa.Table, pa.Table]] = []
    for tables in _batch_results(path, key, config, notes):
        parts.append(tables)
        if len(parts) == per_chunk:
            yield [pa.concat_tables(t) for t in zip(*parts)]
            parts = []
    if parts:
        yield [pa.concat_tables(t) for t in zip(*parts)]


def ingest_archive(
    store: Store,
    key: str,
    path: Path,
    config: IngestConfig = IngestConfig(),
    progress: Progress | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> IngestStats:
    """Parse one archive into its three partition files, replacing any earlier ones.

    Nothing becomes visible unless the whole archive was read: an ArchiveError (truncated
    or corrupt file) leaves the earlier partition files, if any, untouched, and no empty
    partition folders. The partition is locked while it is written: a second run of the
    same partition waits for the first (on_wait is told) and then writes it again. A full
    disk raises NoSpaceError, whose message names the file system, and leaves no file.
    """
    with store.partition_lock(key, on_wait=on_wait) as lease:
        made = [] if store.remote else [t for t in TABLES if not store.partition_dir(t, key).exists()]
        for table in TABLES:
            # No other run writes this partition while we hold its lock: any temporary file
            # here was left by a killed run (never visible to readers).
            remove_stale_tmp(store.partition_dir(table, key))
        # Those that killed runs left in other partitions go too (a live writer's are flock'ed).
        store.remove_dead_writers_tmp(TABLES)
        try:
            return _ingest_locked(store, key, Path(path), config, progress, lease)
        except BaseException as e:
            for table in made:
                try:
                    store.partition_dir(table, key).rmdir()  # only if empty
                except OSError:
                    pass
            raise_if_no_space(e, store.partition_dir("positions", key))
            raise


def _ingest_locked(
    store: Store, key: str, path: Path, config: IngestConfig, progress: Progress | None, lease: Lease | None = None
) -> IngestStats:
    stats = IngestStats(archive=key)
    start = time.perf_counter()
    parts: list[dict[str, AtomicParquetWriter]] = []
    in_part = 0  # positions written to the last part

    def open_part() -> None:
        part = len(parts)
        parts.append({})
        for t in TABLES:
            dest = store.partition_file(t, key, part)
            parts[-1][t] = AtomicParquetWriter(dest, SCHEMAS[t], WRITE_OPTIONS[t], BLOOM.get(t))

    try:
        open_part()
        for games, rejected, positions in _results(key, path, config, stats.notes):
            if in_part and in_part + positions.num_rows > config.part_positions:
                for w in parts[-1].values():
                    w.close()  # finished under its temporary name: its Bloom filters leave memory
                open_part()
                in_part = 0
            writers = parts[-1]
            writers["games"].write(games)
            writers["rejected_games"].write(rejected)
            writers["positions"].write(positions)
            in_part += positions.num_rows
            stats.games += games.num_rows
            stats.rejected += rejected.num_rows
            stats.positions += positions.num_rows
            stats.reject_reasons.update(rejected.column("reason_code").to_pylist())
            stats.seconds = time.perf_counter() - start
            if progress:
                progress(stats)
        if stats.games + stats.rejected == 0:
            raise ArchiveError(f"{path.name}: no games found; is it a PGN file?")
        for writers in parts:
            for w in writers.values():
                w.close()
        if lease is not None:
            lease.check()  # an S3 writer whose partition lease was taken over commits nothing
    except BaseException as e:
        for writers in parts:
            for w in writers.values():
                w.abort(e)
        raise
    remove_book(store, key)  # made from the positions replaced here: pipeline/ingest/book.py makes it again
    for t in TABLES:
        # Parts of an earlier ingest beyond this one's last (made with a smaller part_positions):
        # removed first, so that no reader ever counts a game twice.
        store.remove_parts(t, key, len(parts))
    for writers in parts:
        for w in writers.values():
            w.commit()
    stats.seconds = time.perf_counter() - start
    stats.bytes = {t: sum(storage.size(w[t].dest) for w in parts) for t in TABLES}
    stats.parts = len(parts)
    return stats


def count_games_python_chess(path: Path) -> int:
    """Games in an archive as python-chess counts them (headers only, moves skipped).

    An independent count for reconciliation: it shares no parsing with iter_raw_games, only
    the decompressed text (UTF-16 transcoded). python-chess is given lines of at most
    MAX_GAME_BYTES characters (a longer one comes in pieces), so that its memory, like the
    reader's, does not grow with a line's length.
    """
    n = 0
    with open_text(Path(path)) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)
        lines = _BoundedLines(text)
        while chess.pgn.read_headers(lines) is not None:  # type: ignore[arg-type]
            n += 1
    return n


class _BoundedLines:
    """A text stream whose readline gives at most MAX_GAME_BYTES characters at a time."""

    def __init__(self, text: io.TextIOWrapper):
        self.readline = partial(text.readline, MAX_GAME_BYTES)


def expected_positions(store: Store, key: str) -> int:
    """sum(ply_count + 1) over a partition's games, read back from the written file."""
    games = storage.read_table(store.partition_files("games", key), ["ply_count"])
    return 0 if games is None else int(pc.sum(games.column("ply_count")).as_py() or 0) + games.num_rows
