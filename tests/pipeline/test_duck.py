"""The DuckDB file: readers stay open while runs write Parquet and the views are rebuilt."""

import subprocess
import sys
from pathlib import Path

import chess

from pipeline.duck import connect, create_views, query
from pipeline.encoding import fen_from_row
from pipeline.store import Store
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import add_pgn

ROOT = Path(__file__).resolve().parents[2]
READER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
for line in sys.stdin:
    print(con.sql("SELECT count(*) FROM games").fetchall()[0][0], flush=True)
"""


def test_open_readers_see_no_lock_errors_while_runs_write(tmp_path):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", RATED_GAMES)
    create_views(store)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(store.duckdb_path)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "4"
        # While that process holds the file: write a new partition, rebuild the views, read.
        add_pgn(store, tmp_path, "b.pgn", RATED_GAMES)
        create_views(store)
        with connect(store) as con:
            assert con.sql("SELECT count(*) FROM games").fetchall()[0][0] == 8
        assert query(store, "SELECT count(*) AS n FROM positions").column("n")[0].as_py() > 0
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "8"  # the views are globs: new files show up
    finally:
        reader.stdin.close()
        reader.wait(timeout=30)
    assert reader.returncode == 0


def test_macros_agree_with_python(tmp_path):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", RATED_GAMES)
    with connect(store) as con:
        rows = con.sql("SELECT planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number, "
                       "fen(planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number), "
                       "material(planes), game_phase(planes, fullmove_number) FROM positions").fetchall()
    assert len(rows) == 15 + 15 + 17 + 11  # g1 twice (14 plies), g2 (16), g3 (10): plies + 1 each
    for *cols, fen, material, phase in rows:
        assert fen == fen_from_row(*cols)
        board = chess.Board(fen)
        values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
        expected = sum(v * (len(board.pieces(t, chess.WHITE)) - len(board.pieces(t, chess.BLACK)))
                       for t, v in values.items())
        assert material == expected
        assert phase in ("opening", "middlegame", "endgame")
