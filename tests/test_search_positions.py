"""scripts/search_positions.py on a real static-labelled dataset (200 FICS games): the train rows
kept and followed by children of them, none of them held out or repeated, each labelled as
Stockfish's own `eval` scores it (asked here directly, not through the project's evaluator),
val and test unchanged; and its refusals in one line."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import chess
import chess.polyglot
import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.encoding import fens_from_columns
from tests.engines import faulty_stockfish, static_cp
from tests.stores import first_games
from training.data import LoaderConfig, ParquetBatches

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[1] / "scripts" / "search_positions.py"
CLI = Path(sys.executable).parent / "chess-pipeline"
_SPEC = importlib.util.spec_from_file_location("search_positions", SCRIPT)
study = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(study)


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CHESS_PIPELINE_DEBUG"}
    done = subprocess.run([*args], capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, fics_2022) -> Path:
    tmp = tmp_path_factory.mktemp("search_positions")
    pgn = tmp / "games.pgn"
    first_games(fics_2022, 200, pgn)
    home = ["--home", str(tmp / "store")]
    _run(str(CLI), *home, "ingest", str(pgn))
    _run(str(CLI), *home, "label", "--static")
    _run(str(CLI), *home, "datasets", "sabatelli_regression", "--label-static")
    return tmp / "store" / "datasets" / "sabatelli_regression"


def _keys(t) -> list[int]:
    return t.column("position_key").to_pylist()


def test_children_of_the_train_positions_labelled_by_stockfishs_eval(dataset, tmp_path, stockfish):
    out = tmp_path / "more"
    done = _run(sys.executable, str(SCRIPT), "--data", str(dataset), "--out", str(out), "--workers", "2")
    made = out / "datasets" / "sabatelli_regression"
    train, grown = pq.read_table(dataset / "train.parquet"), pq.read_table(made / "train.parquet")
    for split in ("val", "test"):
        assert (made / f"{split}.parquet").read_bytes() == (dataset / f"{split}.parquet").read_bytes()
    assert grown.slice(0, len(train)).equals(train)  # the dataset's rows first, as they were
    new = grown.slice(len(train))
    assert 0 < len(new) <= 2 * len(train)
    assert f"train {len(train):,} + {len(new):,} rows" in done.stdout

    held = set(_keys(train))
    for split in ("val", "test"):
        held |= set(_keys(pq.read_table(dataset / f"{split}.parquet")))
    new_keys = _keys(new)
    assert len(set(new_keys)) == len(new_keys) and not set(new_keys) & held

    rows = new.to_pydict()
    fens = fens_from_columns(rows["planes"], rows["side_to_move"], rows["castling"], rows["ep_square"])
    boards = [chess.Board(f) for f in fens]
    assert all(b.is_valid() and not b.is_check() for b in boards)
    # every new position is one move from a train position (python-chess's moves, all of them)
    children = set()
    for f in fens_from_columns(
        *(train.column(k).to_pylist() for k in ("planes", "side_to_move", "castling", "ep_square"))
    ):
        parent = chess.Board(f)
        for move in parent.legal_moves:
            parent.push(move)
            children.add((parent.board_fen(), parent.turn))
            parent.pop()
    assert all((b.board_fen(), b.turn) in children for b in boards)
    step = max(1, len(boards) // 40)  # about 40 of them asked of Stockfish directly
    sample = boards[::step]

    white_cp = np.array([static_cp(stockfish, b.fen()) for b in sample])
    stm_cp = np.where([b.turn == chess.WHITE for b in sample], white_cp, -white_cp)
    expected = (np.clip(stm_cp, -1500, 1500) + 1500) / 3000
    got = np.array(rows["target"])[::step]
    np.testing.assert_allclose(got, expected, atol=1e-9)  # static_cp rounds to a centipawn, as the script
    assert np.array_equal(np.array(rows["mirrored"]), np.array(rows["side_to_move"]) == "b")
    assert rows["position_key"] == [chess.polyglot.zobrist_hash(b) for b in boards]  # the store's key
    score = np.array(rows["score"])
    assert np.array_equal(score, np.where(np.array(rows["mirrored"]), -1, 1) * np.array(rows["cp_white"]))
    np.testing.assert_allclose(rows["win_prob"], 1 / (1 + 10 ** (-score / 400)))
    assert "labelling with Stockfish" in done.stdout

    loader = ParquetBatches(made / "train.parquet", LoaderConfig(batch_size=4096, shuffle=False))
    assert sum(len(b.target) for b in loader.epoch(0)) == len(grown)


def test_refusals_are_one_line(dataset, tmp_path):
    taken = tmp_path / "taken" / "datasets" / "sabatelli_regression"
    taken.mkdir(parents=True)
    for args, words in (
        (["--data", str(dataset), "--out", str(tmp_path / "taken")], "exists: give --out a new folder"),
        (["--data", str(tmp_path / "absent"), "--out", str(tmp_path / "o")], "point --data at a"),
        (["--data", str(dataset), "--out", str(tmp_path / "o"), "--children", "0"], "--children is at least 1"),
    ):
        done = _run(sys.executable, str(SCRIPT), *args, check=False)
        assert done.returncode != 0
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("mode", ["crash", "garbage"])
def test_an_engine_that_fails_mid_run_leaves_one_line_and_nothing_written(dataset, tmp_path, stockfish, mode):
    engine = faulty_stockfish(tmp_path, stockfish, mode, n=100)
    args = ["--data", str(dataset), "--out", str(tmp_path / "o"), "--workers", "1", "--stockfish", engine]
    done = _run(sys.executable, str(SCRIPT), *args, check=False)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "search_positions: EngineError" in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("pov", ["side_to_move", "white"])
def test_a_rows_score_and_target_take_the_datasets_point_of_view(pov):
    import pyarrow as pa

    template = pa.schema([("planes", pa.binary(96)), ("side_to_move", pa.string()), ("score", pa.int32()),
                          ("mirrored", pa.bool_()), ("target", pa.float64()), ("game_id", pa.int64())])  # fmt: skip
    black = chess.Board("4k3/8/8/8/8/8/8/3QK3 b - - 0 1")  # Black to move, White a queen up
    rows = study.rows_of([black], np.array([-900.0]), {"pov": pov, "clip_cp": 1500}, template).to_pylist()[0]
    score = -900 if pov == "side_to_move" else 900
    assert rows["score"] == score and rows["mirrored"] == (pov == "side_to_move")
    assert rows["target"] == pytest.approx((score + 1500) / 3000) and rows["game_id"] is None
