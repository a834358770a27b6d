"""An archive's position book: the explorer's figures for the positions it reached often,
summed once per part file of its positions (sql/queries/position_book.sql says what each row
holds). Each positions part (data.parquet, data-0001.parquet, ...: IngestConfig.part_positions)
has a book of the same name, made from it alone, so a book's time and memory grow with the
part, not the archive (one book over a whole archive would read the archive once a key range).

A lookup of a common position otherwise reads every row group of every archive (its Bloom
filters all say yes) and sums tens of thousands of rows: about 0.4 s for the start position of
a store of 10M positions on two cores, growing with the store. With the book the explorer reads
the book's few rows for such a position, and positions rows only from archives where it is rare
(sql/queries/explorer_position.sql), where the Bloom filters leave at most BOOK_MIN_ROWS - 1 row
groups to read.

The books are made from the archive's committed positions files, after the ingest and under the
same partition lock, in a DuckDB of bounded memory (BOOK_MEMORY, spilling beyond). The ingest
removes the books of the positions it replaces before committing them, so a book is always the
one of the positions beside it; where none is (a store ingested before books, a run killed in
between), the explorer counts that part's rows, with the same figures, only slower.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.store import storage
from pipeline.store.schemas import POSITION_BOOK_SCHEMA
from pipeline.store.storage import remove_stale_tmp
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path, raise_if_no_space

BOOK_MIN_ROWS = 16
"""A key is in the book when it has at least this many position rows in the part file; a rarer
position is read from at most this many - 1 positions row groups (plus Bloom false positives)."""
BOOK_TOP = 20
"""Strongest games kept for each position: as many as the explorer lists (explorer.queries.
GAMES_LISTED); /api/position asked for more counts the position's rows instead of the book's.
(Each kept game costs its 8-byte game_id: keeping 200 made the book 2x larger.)"""
BOOK_ELO_STEP = 100
"""Average Elo is kept rounded down to this: the explorer's rating bands must be multiples of it."""
BOOK_MEMORY = "512MB"
"""DuckDB's memory while it makes a book (it spills to the spool folder beyond): the build
counts every key of a part file, so this bounds its memory whatever the archive's size."""
BOOK_PASS_ROWS = 10_000_000
"""Position rows a pass of the book's query covers: a part file of more is done a key range at a
time, each pass reading the file again. (Measured: one pass over 10M positions peaked at 620 MB
RSS, one over 50M ran out of the 512 MB; benchmarks/scale.py prints the whole at 50M.)"""
BOOK_BATCH_ROWS = 65536
"""Book rows a Parquet row group (the rows are sorted by key: each row group's key range prunes)."""
WRITE_OPTIONS = {
    "compression": "zstd",
    "compression_level": 3,
    # game ids and Elo sums rarely repeat: a dictionary only adds to them
    "use_dictionary": [n for n in POSITION_BOOK_SCHEMA.names if n not in ("game_id", "strength", "elo_sum")],
}


@dataclass
class BookStats:
    archive: str
    rows: int = 0
    positions: int = 0
    """Distinct positions the books hold (a position in the books of two parts counts twice)."""
    parts: int = 0
    seconds: float = 0.0
    bytes: int = 0


def remove_book(store: Store, key: str) -> None:
    """Remove an archive's books (its partition lock held): the ingest does, before it commits
    the positions the books were made from."""
    for path in store.partition_files("position_book", key):
        storage.remove(path)


def write_book(store: Store, key: str, on_wait: Callable[[str], None] | None = None) -> BookStats:
    """Make the books of an ingested archive, one from each positions part file, replacing any
    earlier ones."""
    stats = BookStats(archive=key)
    start = time.perf_counter()
    with store.partition_lock(key, on_wait=on_wait) as lease:
        remove_stale_tmp(store.partition_dir("position_book", key))
        parts = store.partition_parts("positions", key)
        for part, source in parts:
            dest = store.partition_file("position_book", key, part)
            try:
                with storage.local_path(source) as positions, atomic_path(dest) as tmp:
                    rows, held = _write(positions, key, Path(tmp))
                    if lease is not None:
                        lease.check()  # a writer whose partition lease was taken over commits nothing
            except OSError as e:
                raise_if_no_space(e, dest)
                raise
            stats.rows += rows
            stats.positions += held
            stats.bytes += storage.size(dest)
        store.remove_parts("position_book", key, len(parts))
    stats.parts = len(parts)
    stats.seconds = time.perf_counter() - start
    return stats


def key_ranges(rows: int) -> list[tuple[int, int]]:
    """The key ranges, lowest first, of the passes over a positions file of `rows` rows: as few
    as keep each under about BOOK_PASS_ROWS rows (keys are spread evenly over 64 bits)."""
    passes = max(1, -(-rows // BOOK_PASS_ROWS))
    edges = [(1 << 64) * i // passes for i in range(passes + 1)]
    return [(edges[i], edges[i + 1] - 1) for i in range(passes)]


def _write(positions: Path, archive: str, out: Path) -> tuple[int, int]:
    """The book of one positions part file, written to `out`: (rows, positions)."""
    import duckdb  # the ingest workers never need it

    from pipeline.store.duck import load_sql, sql_string_literal

    rows = 0
    with duckdb.connect() as con:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET enable_progress_bar = false")
        con.execute("SET preserve_insertion_order = false")  # the query orders its rows itself
        con.execute(f"SET memory_limit = '{BOOK_MEMORY}'")
        con.execute(f"SET temp_directory = {sql_string_literal(str(storage.spool_dir() / 'duckdb'))}")
        params = {
            "positions": str(positions),
            "archive": archive,
            "min_rows": BOOK_MIN_ROWS,
            "top": BOOK_TOP,
            "elo_step": BOOK_ELO_STEP,
        }
        with pq.ParquetWriter(out, POSITION_BOOK_SCHEMA, **WRITE_OPTIONS) as writer:
            for lowest, highest in key_ranges(pq.read_metadata(positions).num_rows):
                sql = con.sql(
                    load_sql("queries/position_book"), params={**params, "lowest_key": lowest, "highest_key": highest}
                )
                for batch in sql.to_arrow_reader(BOOK_BATCH_ROWS):
                    table = pa.Table.from_batches([batch]).cast(POSITION_BOOK_SCHEMA)
                    writer.write_table(table, row_group_size=BOOK_BATCH_ROWS)
                    rows += table.num_rows
        identity = "position_key, planes, side_to_move, castling, ep_square"
        held = con.execute(f"SELECT count(DISTINCT ({identity})) FROM read_parquet($out)", {"out": str(out)})
        return rows, held.fetchall()[0][0]
