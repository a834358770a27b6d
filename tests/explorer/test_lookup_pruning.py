"""A position lookup reads only the Parquet row groups that hold the position (issue 38).

Small-scale stand-in for the 50M-position store: three archives of seeded random games, written
in row groups of a few games, so a lookup that reads the whole store reads every row group of
positions, and one that uses the key-sorted position index reads one row group of positions for
a position one game reached. The counts come from DuckDB's own profiler (row_groups_scanned of
each Parquet scan), so a change that makes the lookup read everything again fails here."""

from __future__ import annotations

import json
import random
import shutil

import chess
import chess.pgn
import chess.polyglot
import pytest

from explorer.queries import explore
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store import duck
from pipeline.store.store import Store

GAMES = 30
PLIES = 40


def random_games(seed: int) -> list[chess.pgn.Game]:
    rng = random.Random(seed)
    games = []
    for i in range(GAMES):
        board = chess.Board()
        for _ in range(PLIES):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        game = chess.pgn.Game.from_board(board)
        game.headers["Event"] = f"seed {seed} game {i}"
        game.headers["WhiteElo"], game.headers["BlackElo"] = "1500", "1600"
        games.append(game)
    return games


class Done:
    def __init__(self, description, table):
        self.description, self.table = description, table
        self.rows = [tuple(r.values()) for r in table.to_pylist()]

    def fetchall(self):
        return self.rows

    def to_arrow_table(self):
        return self.table

    def fetchone(self):
        return self.rows[0] if self.rows else None


class Profiled:
    """The real DuckDB connection, recording the Parquet scans of every query run through it."""

    def __init__(self, con, folder):
        self.con, self.out, self.scans = con, folder / "profile.json", []
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute(f"PRAGMA profiling_output = '{self.out}'")

    def execute(self, sql, params=None):
        rel = self.con.execute(sql, params)
        done = Done(rel.description, rel.to_arrow_table())  # the profile is written once the query ends
        self._record()
        return done

    def sql(self, sql, params=None):
        return self.execute(sql, params)

    def _record(self):
        def walk(node):
            info = node.get("extra_info", {})
            if info.get("Function") == "READ_PARQUET":
                self.scans.append((info.get("Filename(s)", ""), node["row_groups_scanned"]))
            for child in node.get("children", []):
                walk(child)

        for op in json.loads(self.out.read_text())["operator"]:
            walk(op)

    def row_groups(self, table: str) -> int:
        return sum(n for files, n in self.scans if f"/{table}/" in files)

    def __getattr__(self, name):
        return getattr(self.con, name)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pruning")
    store = Store(folder / "store").ensure()
    config = IngestConfig(workers=1, chunk_games=5, batch_games=5, index_row_group=64)
    for seed in range(3):
        path = folder / f"random{seed}.pgn"
        path.write_text("\n\n".join(str(g) for g in random_games(seed)) + "\n")
        ingest_archive(store, store.add_archive(path), path, config)
    duck.create_views(store)
    return store


def test_a_rare_position_reads_one_row_group_of_positions(store, tmp_path):
    # A position 30 plies into a random game: reached by that game only (python-chess says so).
    game = random_games(1)[17]
    board = game.board()
    for move in list(game.mainline_moves())[:30]:
        board.push(move)
    with duck.connect(store) as con:
        total = con.execute(
            "SELECT count(*) FROM parquet_metadata(?) WHERE column_id = 0",
            [str(store.root / "positions" / "archive=*" / "data.parquet")],
        ).fetchall()[0][0]
        assert total == 3 * GAMES // 5  # every 5 games a row group
        profiled = Profiled(con, tmp_path)
        answer = explore(profiled, board)
    assert answer["games"] == 1 and answer["position_key"] == f"{chess.polyglot.zobrist_hash(board):016x}"
    assert [m["uci"] for m in answer["moves"]] == [list(game.mainline_moves())[30].uci()]
    assert profiled.row_groups("positions") == 1, profiled.scans
    # the index: one row group of the archive that holds it, none elsewhere (min/max of the key)
    assert profiled.row_groups("position_index") <= 3, profiled.scans


def test_the_start_position_still_counts_every_game(store, tmp_path):
    with duck.connect(store) as con:
        answer = explore(con, chess.Board())
    assert answer["games"] == 3 * GAMES
    assert sum(m["games"] for m in answer["moves"]) == 3 * GAMES


def test_a_store_written_before_the_index_gets_it_when_opened(tmp_path):
    store = Store(tmp_path / "store").ensure()
    path = tmp_path / "old.pgn"
    path.write_text("\n\n".join(str(g) for g in random_games(7)[:4]) + "\n")
    ingest_archive(store, store.add_archive(path), path, IngestConfig(workers=1))
    duck.create_views(store)
    shutil.rmtree(store.root / "position_index")  # as a store from before the index
    with duck.read_only_connection(store) as con:
        assert explore(con, chess.Board())["games"] == 4
    assert list((store.root / "position_index").glob("archive=*/data.parquet"))
