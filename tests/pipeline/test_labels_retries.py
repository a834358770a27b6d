"""Retries that succeed are counted: an engine wrapper (tests/engines.py) that crashes once on a
chosen position, run through labels' real entry point."""

from pathlib import Path

import chess

from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.engines import search_fault_stockfish
from tests.stores import add_pgn

PGN = '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 *\n'


def position_fen(moves: str) -> str:
    """The FEN the pool sends for the position after these moves (clocks 0 1, as stored)."""
    board = chess.Board()
    for san in moves.split():
        board.push_san(san)
    return " ".join(board.fen().split()[:4] + ["0", "1"])


CHOSEN = position_fen("e4 e5 Nf3")


def test_a_crash_once_on_one_position_is_one_retry_and_its_label_is_stored(tmp_path, stockfish):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", PGN)
    path = search_fault_stockfish(tmp_path, stockfish, CHOSEN, "crash")
    reports = []
    with EnginePool(path, workers=1) as pool:
        stats = label_store(store, pool, LabelRun(), progress=reports.append)
    assert Path(f"{path}.faults").read_text().splitlines() == ["crash"]
    assert (stats.labelled, stats.failed, stats.retried, stats.engine_restarts) == (7, 0, 1, 1)
    final = reports[-1]
    assert (final.retried, final.engine_restarts) == (1, 1)
    assert final.retries_text == ", 1 retried (1 engine restart)"
    with memory_connection(store) as con:
        rows = con.execute("SELECT fen FROM labels WHERE fen = ?", [CHOSEN]).fetchall()
    assert rows == [(CHOSEN,)]
