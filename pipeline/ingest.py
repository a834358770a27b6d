"""Archive -> games, rejected_games and positions Parquet, using every core."""

from __future__ import annotations

import io
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path

import chess.pgn
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.archive import ArchiveError, RawGame, iter_raw_games, open_archive
from pipeline.games import GAMES_SCHEMA, POSITIONS_SCHEMA, REJECTED_SCHEMA, process_games
from pipeline.store import TMP_SUFFIX, AtomicParquetWriter, Store

TABLES = ("games", "rejected_games", "positions")
SCHEMAS = {"games": GAMES_SCHEMA, "rejected_games": REJECTED_SCHEMA, "positions": POSITIONS_SCHEMA}


@dataclass(frozen=True)
class IngestConfig:
    """How one archive is ingested."""

    workers: int = 0
    """Worker processes; 0 means one per core. 1 parses in the calling process."""
    chunk_games: int = 2000
    """Games per unit of work (and per Parquet row group). Fixed, so output files do not
    depend on the number of workers."""


@dataclass
class IngestStats:
    archive: str
    games: int = 0
    rejected: int = 0
    positions: int = 0
    seconds: float = 0.0
    reject_reasons: Counter = field(default_factory=Counter)
    bytes: dict[str, int] = field(default_factory=dict)

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
    ctx.set_forkserver_preload(["pipeline.games"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def _results(key: str, path: Path, config: IngestConfig) -> Iterator[tuple[pa.Table, pa.Table, pa.Table]]:
    """Processed chunks in archive order, with at most 2 x workers chunks in flight."""
    workers = config.workers or os.cpu_count() or 1
    chunks = _chunks(iter_raw_games(path), config.chunk_games)
    head = list(islice(chunks, 2))
    if workers == 1 or len(head) < 2:
        # One chunk (or one worker): a process pool would only add its start-up time.
        for chunk in chain(head, chunks):
            yield process_games(key, chunk)
        return
    with _pool(workers) as pool:
        pending: list[Future] = [pool.submit(process_games, key, chunk) for chunk in head]
        try:
            for chunk in chunks:
                pending.append(pool.submit(process_games, key, chunk))
                while len(pending) >= 2 * workers:
                    yield pending.pop(0).result()
            while pending:
                yield pending.pop(0).result()
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def ingest_archive(store: Store, key: str, path: Path, config: IngestConfig = IngestConfig(),
                   progress: Progress | None = None) -> IngestStats:
    """Parse one archive into its three partition files, replacing any earlier ones.

    Nothing becomes visible unless the whole archive was read: an ArchiveError (truncated
    or corrupt file) leaves the earlier partition files, if any, untouched.
    """
    stats = IngestStats(archive=key)
    start = time.perf_counter()
    for table in TABLES:
        # Temporary files a killed run left behind (never visible to readers).
        for stale in store.partition_dir(table, key).glob(f".*{TMP_SUFFIX}"):
            stale.unlink(missing_ok=True)
    writers = {t: AtomicParquetWriter(store.partition_file(t, key), SCHEMAS[t]) for t in TABLES}
    try:
        for games, rejected, positions in _results(key, Path(path), config):
            writers["games"].write(games)
            writers["rejected_games"].write(rejected)
            writers["positions"].write(positions)
            stats.games += games.num_rows
            stats.rejected += rejected.num_rows
            stats.positions += positions.num_rows
            stats.reject_reasons.update(rejected.column("reason_code").to_pylist())
            stats.seconds = time.perf_counter() - start
            if progress:
                progress(stats)
        if stats.games + stats.rejected == 0:
            raise ArchiveError(f"{Path(path).name}: no games found; is it a PGN file?")
    except BaseException as e:
        for w in writers.values():
            w.abort(e)
        raise
    for w in writers.values():
        w.commit()
    stats.seconds = time.perf_counter() - start
    stats.bytes = {t: store.partition_file(t, key).stat().st_size for t in TABLES}
    return stats


def count_games_python_chess(path: Path) -> int:
    """Games in an archive as python-chess counts them (headers only, moves skipped).

    An independent count for reconciliation: it shares no code with iter_raw_games.
    """
    n = 0
    with open_archive(Path(path)) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)
        while chess.pgn.read_headers(text) is not None:
            n += 1
    return n


def expected_positions(store: Store, key: str) -> int:
    """sum(ply_count + 1) over a partition's games, read back from the written file."""
    games = pq.read_table(store.partition_file("games", key), columns=["ply_count"])
    return int(pc.sum(games.column("ply_count")).as_py() or 0) + games.num_rows
