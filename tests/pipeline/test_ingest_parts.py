"""An archive of more positions than IngestConfig.part_positions is written in part files (the
writer's memory is then bounded: Arrow keeps a file's Bloom filters until it closes it). Checked
against the same archive written as one part: every view and the explorer agree. Each part has a
book of its own, made from it alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import chess
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from explorer.queries import book_parts, explore, position_params
from pipeline.ingest.book import write_book
from pipeline.ingest.encoding import fens_from_columns
from pipeline.ingest.ingest import TABLES, IngestConfig, expected_positions, ingest_archive
from pipeline.plots import games_charts
from pipeline.store import duck
from pipeline.store.store import Store

PART = 60_000
"""Positions a part holds at most here: the FICS 2022 archive (about 180,000) then has 4 parts."""
CHUNK = 100


def config(part_positions: int = PART) -> IngestConfig:
    return IngestConfig(workers=1, chunk_games=CHUNK, batch_games=CHUNK, part_positions=part_positions)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, fics_2022) -> tuple[Store, Store]:
    """The same archive as one part, and in parts of at most PART positions."""
    made = []
    for name, part in (("whole", 10**9), ("parts", PART)):
        store = Store(tmp_path_factory.mktemp(name) / "store").ensure()
        stats = ingest_archive(store, "fics", fics_2022, config(part))
        write_book(store, "fics")
        made.append((store, stats))
    (whole, one), (parts, many) = made
    assert one.parts == 1 and many.parts >= 3, (one.parts, many.parts)
    assert (many.games, many.positions, many.rejected) == (one.games, one.positions, one.rejected)
    return whole, parts


def test_each_part_holds_at_most_its_positions_and_the_same_games_in_every_table(stores):
    _, store = stores
    names = {t: [p.name for p in store.partition_files(t, "fics")] for t in TABLES}
    n = len(names["positions"])
    assert names["positions"][:2] == ["data.parquet", "data-0001.parquet"] and n >= 3
    assert all(len(v) == n for v in names.values()), names
    for part in range(n):
        positions = pq.read_table(store.partition_file("positions", "fics", part), columns=["game_id"])
        games = pq.read_table(store.partition_file("games", "fics", part), columns=["game_id", "game_index"])
        assert 0 < positions.num_rows <= PART
        assert set(pc.unique(positions["game_id"]).to_pylist()) == set(games["game_id"].to_pylist())
        if part:  # parts follow each other in the archive's order, cut between row groups
            before = pq.read_table(store.partition_file("games", "fics", part - 1), columns=["game_index"])
            assert games["game_index"][0].as_py() == before["game_index"][-1].as_py() + 1
            assert before.num_rows % CHUNK == 0


def test_the_views_the_book_and_the_explorer_give_what_one_part_gives(stores):
    whole, parts = stores
    queries = [
        "SELECT count(*), sum(hash(game_id, ply, position_key, planes, move_uci)) FROM positions",
        "SELECT count(*), sum(hash(game_id, moves_uci, white_elo)) FROM games",
        "SELECT count(*) FROM rejected_games",
        "SELECT count(*), sum(hash(position_key, planes)) FROM distinct_positions",
        "SELECT archive, count(*) FROM positions_by_archive GROUP BY archive",
    ]
    assert [duck.query(parts, q).to_pylist() for q in queries] == [duck.query(whole, q).to_pylist() for q in queries]
    assert expected_positions(parts, "fics") == expected_positions(whole, "fics")
    one, many = (games_charts(st.partition_files("games", "fics"), "fics") for st in (whole, parts))
    assert many["players"] == one["players"] > 100 and many["rated_players"] == one["rated_players"]
    boards = [chess.Board()]
    for san in ("e4", "e5", "Nf3", "Nc6", "Bb5", "a6"):
        boards.append(boards[-1].copy())
        boards[-1].push_san(san)
    with duck.read_only_connection(whole) as a, duck.read_only_connection(parts) as b:
        for board in boards:
            assert explore(b, board) == explore(a, board), board.fen()


def test_each_part_has_its_own_book_and_the_explorer_sums_books_and_rows_as_it_counts_rows(stores, tmp_path):
    """A position common in one part and rare in another is read from the first's book and the
    second's rows: the same figures as counting every row (the explorer without books)."""
    _, store = stores
    books = [p.name for p in store.partition_files("position_book", "fics")]
    assert books == [p.name for p in store.partition_files("positions", "fics")]
    # each book is the book of its positions part alone
    alone = Store(tmp_path / "alone").ensure()
    alone.partition_dir("positions", "fics").mkdir(parents=True)
    last = len(books) - 1
    alone.partition_file("positions", "fics").write_bytes(store.partition_file("positions", "fics", last).read_bytes())
    write_book(alone, "fics")
    assert pq.read_table(alone.partition_file("position_book", "fics")).equals(
        pq.read_table(store.partition_file("position_book", "fics", last))
    )
    # positions reached in every part, and in the book of some parts only
    with duck.memory_connection(store) as con:
        mixed = con.execute(
            "SELECT any_value(planes), any_value(side_to_move), any_value(castling), any_value(ep_square) "
            "FROM positions_by_archive GROUP BY position_key, part HAVING count(*) BETWEEN 2 AND 15 "
            "AND position_key IN (SELECT position_key FROM position_book_by_part) LIMIT 20"
        ).fetchall()
        boards = [chess.Board(fen) for fen in fens_from_columns(*zip(*mixed))] + [chess.Board()]
        some = 0
        for board in boards:
            parts_with_book = book_parts(con, board)
            some += 0 < len(parts_with_book) < len(books)
            with_book = con.sql(
                duck.load_sql("queries/explorer_position"), params=position_params(board, books=parts_with_book)
            ).fetchall()
            counted = con.sql(duck.load_sql("queries/explorer_position"), params=position_params(board)).fetchall()
            assert with_book == counted, board.fen()
    assert some >= 5, some


def test_a_reingest_in_fewer_parts_leaves_no_part_of_the_earlier_one(stores, fics_2022, tmp_path):
    _, parts = stores
    store = Store(tmp_path / "store").ensure()
    first = ingest_archive(store, "fics", fics_2022, config())
    data = {t: [p.read_bytes() for p in store.partition_files(t, "fics")] for t in TABLES}
    assert data["positions"] == [p.read_bytes() for p in parts.partition_files("positions", "fics")]
    assert ingest_archive(store, "fics", fics_2022, config()).parts == first.parts  # byte for byte again
    assert {t: [p.read_bytes() for p in store.partition_files(t, "fics")] for t in TABLES} == data

    ingest_archive(store, "fics", fics_2022, config(2 * PART))
    fewer = [p.name for p in store.partition_files("positions", "fics")]
    assert 1 < len(fewer) < first.parts
    for t in TABLES:
        assert sorted(p.name for p in store.partition_dir(t, "fics").iterdir()) == sorted(fewer), t
    assert duck.query(store, "SELECT count(*) FROM positions").column(0)[0].as_py() == first.positions


def test_a_part_size_below_one_position_is_refused():
    with pytest.raises(ValueError, match="part_positions"):
        IngestConfig(part_positions=0)


KILLED_WRITER = """
import sys
from pathlib import Path
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store.store import Store
config = IngestConfig(workers=1, chunk_games=100, batch_games=100, part_positions=int(sys.argv[3]))
ingest_archive(Store(Path(sys.argv[1])), "fics", Path(sys.argv[2]), config)
"""


def test_an_ingest_killed_between_parts_shows_no_part_and_the_next_one_writes_them_all(tmp_path, fics_2022):
    """kill -9 while the second part is written, the first finished under its temporary name:
    readers see no part of the archive (every part appears only at the commit), and the next
    ingest removes what the killed one left and writes every part."""
    store = Store(tmp_path / "store").ensure()
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(store.root), str(fics_2022), str(PART // 3)])
    positions = store.partition_dir("positions", "fics")
    deadline = time.monotonic() + 120
    while len(list(positions.glob(".*.tmp"))) < 2:  # part 0 closed, part 1 open
        assert writer.poll() is None and time.monotonic() < deadline, "the ingest ended before its second part"
        time.sleep(0.002)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    for t in TABLES:
        assert store.partition_files(t, "fics") == [], t
    assert duck.query(store, "SELECT count(*) FROM positions").column(0)[0].as_py() == 0

    stats = ingest_archive(store, "fics", fics_2022, config(PART // 3))
    for t in TABLES:
        names = [p.name for p in store.partition_dir(t, "fics").iterdir()]
        assert not [n for n in names if n.endswith(".tmp")] and len(names) == stats.parts > 5, (t, names)
    assert duck.query(store, "SELECT count(*) FROM positions").column(0)[0].as_py() == stats.positions == 169032
