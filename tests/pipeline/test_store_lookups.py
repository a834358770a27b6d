"""Lookups that read only what they should: the small-scale version of benchmarks/scale.py's
lookup figures (issue 38). Each test reads DuckDB's profile of the query the product runs
(EXPLAIN (ANALYZE, FORMAT json): row groups scanned, rows out of each operator) on a store of
one real archive written in small row groups, and checks it against counts pyarrow takes from
the positions file itself."""

from __future__ import annotations

import json
from collections import Counter

import chess
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from explorer.position import position_key
from explorer.queries import book_parts, explore, position_params
from pipeline.ingest.book import BOOK_MIN_ROWS, BOOK_TOP, write_book
from pipeline.ingest.encoding import fens_from_columns
from pipeline.ingest.ingest import BLOOM, SCHEMAS, WRITE_OPTIONS, IngestConfig, ingest_archive
from pipeline.labels.setting import LabelRun, Setting
from pipeline.labels.shards import SHARDS, pending_params
from pipeline.labels.uci import Limit
from pipeline.store import duck
from pipeline.store.store import Store
from pipeline.store.store_files import AtomicParquetWriter

GAMES_A_ROW_GROUP = 50


def profile(con, sql: str, params: dict) -> list[dict]:
    """Every operator of `sql`'s executed plan, depth first."""
    text = con.execute("EXPLAIN (ANALYZE, FORMAT json) " + sql, params).fetchall()[0][1]
    ops: list[dict] = []

    def walk(node: dict) -> None:
        ops.append(node)
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(text)["operator"]:
        walk(node)
    return ops


def positions_scan(ops: list[dict]) -> dict:
    [scan] = [o for o in ops if "row_groups_scanned" in o and "/positions/" in o["extra_info"].get("Filename(s)", "")]
    return scan


@pytest.fixture(scope="module")
def store(tmp_path_factory, fics_2022):
    store = Store(tmp_path_factory.mktemp("lookups") / "store").ensure()
    config = IngestConfig(workers=1, chunk_games=GAMES_A_ROW_GROUP, batch_games=GAMES_A_ROW_GROUP)
    ingest_archive(store, "fics", fics_2022, config)
    write_book(store, "fics")
    return store


@pytest.fixture(scope="module")
def positions(store):
    return pq.read_table(store.partition_file("positions", "fics"))


def row_groups(store: Store) -> int:
    """Row groups of the archive's positions file."""
    return pq.ParquetFile(store.partition_file("positions", "fics")).metadata.num_row_groups


def board_of(positions, row: int) -> chess.Board:
    r = positions.slice(row, 1).to_pylist()[0]
    [fen] = fens_from_columns([r["planes"]], [r["side_to_move"]], [r["castling"]], [r["ep_square"]])
    return chess.Board(fen)


def test_a_rare_positions_games_are_read_from_the_row_groups_its_bloom_filters_admit(store, positions):
    keys = positions.column("position_key").to_pylist()
    counts = Counter(keys)
    row = next(
        i for i, (k, ply) in enumerate(zip(keys, positions.column("ply").to_pylist())) if ply == 40 and counts[k] == 1
    )
    board = board_of(positions, row)

    with duck.memory_connection(store) as con:
        assert book_parts(con, board) == []  # one game: not in the book
        scan = positions_scan(profile(con, duck.load_sql("queries/explorer_position"), position_params(board)))
        found = explore(con, board)
    groups = row_groups(store)
    assert groups >= 20  # the archive's 1,000-odd games in row groups of 50 games
    assert found["games"] == 1 and found["top_games"][0]["ply"] == 40
    assert scan["total_row_groups_to_scan"] == groups + 1  # and the empty schema file's
    # the row group holding the game, and at most a 5% false positive or two of the others
    assert 1 <= scan["row_groups_scanned"] <= 3, scan["row_groups_scanned"]


def test_a_common_position_is_read_from_the_book_and_its_archives_positions_file_is_not_opened(store, positions):
    start = chess.Board()
    with duck.memory_connection(store) as con:
        books = book_parts(con, start)
        ops = profile(con, duck.load_sql("queries/explorer_position"), position_params(start, books=books))
        raw = profile(con, duck.load_sql("queries/explorer_position"), position_params(start))
        found = explore(con, start)
        more = explore(con, start, games_listed=BOOK_TOP + 30)  # more than the book keeps: counted from rows
    assert books == ["fics/data.parquet"]
    assert len(more["top_games"]) == BOOK_TOP + 30 and more["top_games"][:BOOK_TOP] == found["top_games"]
    # every game starts at the start position: without the book every row group is read
    assert positions_scan(raw)["row_groups_scanned"] == row_groups(store)
    assert positions_scan(ops)["row_groups_scanned"] == 0  # only the empty schema file is left to it
    assert found["games"] == pq.read_metadata(store.partition_file("games", "fics")).num_rows


def some_positions(positions) -> list[chess.Board]:
    """A position of every frequency from 1 to 3 rows above the book's threshold, and the 8
    most frequent (the start position first): the first such position of the file each."""
    keys = positions.column("position_key").to_pylist()
    counts = Counter(keys)
    first_row: dict[int, int] = {}
    for row, key in enumerate(keys):
        first_row.setdefault(key, row)
    one_per_count: dict[int, int] = {}
    for key, n in counts.items():
        one_per_count.setdefault(n, key)
    wanted = [n for n in sorted(one_per_count) if n <= BOOK_MIN_ROWS + 3] + sorted(one_per_count)[-8:]
    return [board_of(positions, first_row[one_per_count[n]]) for n in wanted]


def test_the_book_gives_the_figures_counting_the_positions_rows_gives(store, positions):
    """The same figures, read from the book or counted from every row (the explorer's own
    query without the book: its figures before the book), for positions of every frequency
    from 1 game to every game, including the book's threshold on both sides."""
    boards = some_positions(positions)
    counts = Counter(positions.column("position_key").to_pylist())
    with duck.memory_connection(store) as con:
        in_book = 0
        for board in boards:
            books = book_parts(con, board)
            in_book += bool(books)
            with_book = con.sql(
                duck.load_sql("queries/explorer_position"),
                params=position_params(board, books=books),
            ).fetchall()
            counted = con.sql(duck.load_sql("queries/explorer_position"), params=position_params(board)).fetchall()
            assert with_book == counted, board.fen()
            assert bool(books) == (counts[position_key(board).key] >= BOOK_MIN_ROWS), board.fen()
    assert 5 <= in_book < len(boards), (in_book, len(boards))


def test_a_book_is_rewritten_byte_for_byte_and_a_reingest_removes_the_old_one(tmp_path, fics_2022):
    store = Store(tmp_path / "store").ensure()
    ingest_archive(store, "fics", fics_2022, IngestConfig(workers=1))
    book = store.partition_file("position_book", "fics")
    assert not book.exists()
    first = write_book(store, "fics")
    data = book.read_bytes()
    assert write_book(store, "fics").rows == first.rows > 0 and book.read_bytes() == data
    ingest_archive(store, "fics", fics_2022, IngestConfig(workers=1))  # its positions are replaced
    assert not book.exists()


def test_a_shards_pending_positions_group_only_that_shards_rows(store, positions):
    keys = positions.column("position_key")
    in_shard = pc.equal(
        pc.bit_wise_and(keys, pa.scalar(SHARDS - 1, pa.uint64())), pa.scalar(0, pa.uint64())
    )  # % SHARDS, a power of two
    shard_rows = positions.filter(in_shard)
    distinct = shard_rows.group_by(["position_key", "planes", "side_to_move", "castling", "ep_square"]).aggregate([])
    setting = Setting("Stockfish (none labelled)", Limit())

    with duck.memory_connection(store) as con:
        sql, params = duck.load_sql("queries/pending_labels"), pending_params(setting, LabelRun(), [0])
        ops = profile(con, sql, params)
        pending = con.execute(sql, params).fetchall()
    assert len(pending) == distinct.num_rows
    assert positions_scan(ops)["row_groups_scanned"] == row_groups(store)  # a shard is in every row group
    # past the scan, no operator sees more than the shard's own rows: the filter runs before
    # the grouping (grouping every position first, then keeping one shard, was 8x slower)
    biggest = max(o["intermediate_rows"] for o in ops if o["type"] != "TABLE_SCAN")
    assert shard_rows.num_rows < positions.num_rows // 8
    assert biggest == shard_rows.num_rows, (biggest, shard_rows.num_rows, positions.num_rows)


def test_a_bloom_filtered_file_with_no_rows_is_still_a_file_of_the_schema(tmp_path):
    """The writer opens the file at its first write, to size the filters: an archive of only
    rejected games writes none, and its positions file must still appear, empty."""
    dest = tmp_path / "positions.parquet"
    writer = AtomicParquetWriter(dest, SCHEMAS["positions"], WRITE_OPTIONS["positions"], BLOOM["positions"])
    writer.commit()
    assert pq.read_table(dest).schema == SCHEMAS["positions"] and pq.read_metadata(dest).num_rows == 0


def test_a_book_made_a_key_range_at_a_time_is_the_book_made_at_once(store, tmp_path, monkeypatch):
    """A large archive's book is made in passes over key ranges (bounded memory): the same rows."""
    import pipeline.ingest.book as book

    whole = pq.read_table(store.partition_file("position_book", "fics"))
    copy = Store(tmp_path / "copy").ensure()
    copy.partition_dir("positions", "fics").mkdir(parents=True)
    copy.partition_file("positions", "fics").write_bytes(store.partition_file("positions", "fics").read_bytes())
    monkeypatch.setattr(book, "BOOK_PASS_ROWS", 20_000)
    assert len(book.key_ranges(pq.read_metadata(copy.partition_file("positions", "fics")).num_rows)) >= 8
    write_book(copy, "fics")
    assert pq.read_table(copy.partition_file("position_book", "fics")).equals(whole)
