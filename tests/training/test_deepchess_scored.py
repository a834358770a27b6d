"""deepchess_scored and the comparator whose train pairs are ordered by Stockfish's score (issue 39),
on 300 real FICS games labelled by `chess-pipeline label --static`: val and test are deepchess's rows;
train is every position of its games that DeepChess's sampling allows (counted here by python-chess
from the games' moves), each with the score Stockfish's own `eval` gives it (asked directly); pairs
by score are ordered by it, each position once an epoch, the same for a seed; a run learns from them,
keeps the published protocol's held-out pairs and its material baseline fitted on pairs by the winner,
and records its lead over that baseline with the interval."""

import os
import subprocess
import sys
from pathlib import Path

import chess
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.ingest.encoding import fens_from_columns
from tests.engines import static_cp
from tests.stores import first_games
from tests.training.conftest import QUIET
from training.checkpoints import evaluate
from training.data import LoaderConfig
from training.deepchess import RIGHT, MaterialBaseline, PairBatches
from training.encoders import get_encoder
from training.models import ModelSpec
from training.train import TrainConfig, load_model, train

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

CLI = Path(sys.executable).parent / "chess-pipeline"
KEY = ["position_key", "game_id", "ply"]


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CHESS_PIPELINE_DEBUG"}
    done = subprocess.run([*args], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory, fics_2022) -> Path:
    tmp = tmp_path_factory.mktemp("deepchess_scored")
    pgn = tmp / "games.pgn"
    first_games(fics_2022, 300, pgn)
    cli = [str(CLI), "--home", str(tmp / "store")]
    _run(*cli, "ingest", str(pgn))
    _run(*cli, "label", "--static")
    _run(*cli, "datasets", "deepchess", "deepchess_scored", "--static")
    return tmp / "store"


def _split(home: Path, name: str, split: str):
    return pq.read_table(home / "datasets" / name / f"{split}.parquet")


def test_val_and_test_are_deepchess_rows_and_train_every_eligible_position_of_its_games(home):
    for split in ("val", "test"):
        ours, theirs = _split(home, "deepchess_scored", split), _split(home, "deepchess", split)
        assert ours.num_rows == theirs.num_rows > 0
        assert sorted(zip(*ours.select(KEY).to_pydict().values(), strict=True)) == sorted(
            zip(*theirs.select(KEY).to_pydict().values(), strict=True)
        )
    train = _split(home, "deepchess_scored", "train")
    assert train.num_rows > 3 * _split(home, "deepchess", "train").num_rows  # every position, not 10 a game
    # Independently: replay each train game's moves with python-chess; after move 5, every position
    # not reached by a capture is a train row, except those the leakage guard gave to val or test.
    con = duckdb.connect()
    games = con.execute(
        f"SELECT game_id, moves_uci, outcome FROM read_parquet('{home}/games/**/*.parquet') "
        f"WHERE game_id IN (SELECT DISTINCT game_id FROM '{home}/datasets/deepchess_scored/train.parquet')"
    ).fetchall()
    held = {k for s in ("val", "test") for k in _split(home, "deepchess_scored", s).column("position_key").to_pylist()}
    rows = set(zip(train.column("game_id").to_pylist(), train.column("ply").to_pylist(), strict=True))
    keys = dict(
        zip(
            zip(train.column("game_id").to_pylist(), train.column("ply").to_pylist(), strict=True),
            train.column("position_key").to_pylist(),
            strict=True,
        )
    )
    expected = set()
    for game_id, moves, outcome in games:
        assert outcome in ("1-0", "0-1")  # decisive games only
        board = chess.Board()
        for ply, uci in enumerate(moves.split(), start=1):
            capture = board.is_capture(chess.Move.from_uci(uci))
            board.push_uci(uci)
            if ply >= 10 and not capture:
                expected.add((game_id, ply))
    assert rows <= expected
    missing = expected - rows
    assert len(missing) < 0.05 * len(expected)
    assert not {keys.get(m) for m in missing} - {None}  # not in train at all ...
    # ... and each is a position val or test holds (the guard), seen by its key in the store
    con.register("missing", pa.table({"g": [g for g, _ in missing], "p": [p for _, p in missing]}))
    missing_keys = con.execute(
        f"SELECT DISTINCT position_key FROM read_parquet('{home}/positions/**/*.parquet') p "
        "SEMI JOIN missing m ON p.game_id = m.g AND p.ply = m.p"
    ).fetchall()
    assert len(missing_keys) >= (1 if missing else 0)
    assert {k for (k,) in missing_keys} <= held


def test_train_scores_are_stockfishs_own_eval_and_none_in_check(home, stockfish):
    train = _split(home, "deepchess_scored", "train")
    fens = fens_from_columns(
        *(train.column(c).to_pylist() for c in ("planes", "side_to_move", "castling", "ep_square"))
    )
    score = train.column("score").to_pylist()
    rng = np.random.default_rng(0)
    in_check = [i for i, f in enumerate(fens) if chess.Board(f).is_check()]
    assert in_check and all(score[i] is None for i in in_check)
    scored = [i for i, s in enumerate(score) if s is not None]
    assert len(scored) == train.num_rows - len(in_check)
    for i in rng.choice(scored, 12, replace=False):
        assert score[i] == static_cp(stockfish, fens[i]), fens[i]


def test_pairs_by_score_are_ordered_by_it_each_position_once_an_epoch_the_same_for_a_seed(home, tmp_path):
    path = home / "datasets" / "deepchess_scored" / "train.parquet"
    pairs = PairBatches(path, LoaderConfig(batch_size=64), seed=3, order="score")
    score = pq.read_table(path, columns=["score"]).column("score").to_numpy(zero_copy_only=False)
    scored = np.flatnonzero(~np.isnan(score.astype(float)))
    assert pairs.rows == len(scored) // 2
    left, right, target = pairs.pairs(0)
    both = np.concatenate([left, right])
    assert len(np.unique(both)) == len(both) and set(both) <= set(scored)
    differ = score[left] != score[right]
    assert differ.mean() > 0.9
    assert np.array_equal(target[differ], (score[right] > score[left])[differ].astype(int) * RIGHT)
    again = PairBatches(path, LoaderConfig(batch_size=64), seed=3, order="score").pairs(0)
    assert all(np.array_equal(a, b) for a, b in zip((left, right, target), again, strict=True))
    assert not np.array_equal(pairs.pairs(1)[0], left)  # a new draw each epoch
    batches = list(pairs.epoch(0))
    assert sum(len(b.target) for b in batches) == pairs.rows
    unscored = tmp_path / "unscored.parquet"  # a set built from a store without labels of its setting
    table = pq.read_table(path)
    i = table.schema.get_field_index("score")
    pq.write_table(table.set_column(i, "score", pa.nulls(table.num_rows, table.schema.field("score").type)), unscored)
    with pytest.raises(ValueError, match="has no position with a score: label the store .* same label flags$"):
        PairBatches(unscored, order="score")
    with pytest.raises(ValueError, match="has no score column: pairs ordered by score need a set that has one"):
        PairBatches(home / "datasets" / "deepchess" / "train.parquet", order="score")
    with pytest.raises(ValueError, match="pair order must be one of winner, score; got 'elo'"):
        ModelSpec("siamese", hidden=(8,), tower=(8,), pair_order="elo")


def test_a_run_learns_from_score_pairs_and_is_judged_on_the_winners_pairs_against_material(home, tmp_path):
    cfg = TrainConfig(
        store=str(home),
        dataset="deepchess_scored",
        model="deepchess_scored",
        encoder="bitmap773",
        epochs=6,
        pretrain_epochs=1,
        patience=6,
        batch_size=32,
        device="cpu",
        threads=1,
        out=str(tmp_path / "run"),
    )
    result = train(cfg, log=QUIET)
    test = result.test
    folder = home / "datasets" / "deepchess_scored"
    # the held-out pairs are the published protocol's: a White-won position against a Black-won one
    held = PairBatches(folder / "test.parquet", LoaderConfig(batch_size=4096, shuffle=False))
    assert test["rows"] == held.rows
    # the baseline was fitted on train's pairs by the winner, not on the model's pairs by score
    winner = PairBatches(folder / "train.parquet", LoaderConfig(batch_size=32), seed=0)
    fitted = MaterialBaseline.fit(winner)
    assert test["material_baseline_intercept"] == pytest.approx(fitted.a)
    assert test["material_baseline_slope"] == pytest.approx(fitted.b)
    assert test["material_baseline_accuracy"] == pytest.approx(fitted.accuracy(held))
    assert test["material_lead"] == pytest.approx(test["accuracy"] - test["material_baseline_accuracy"])
    assert 0 < test["material_lead_ci95"] < 0.5  # a few dozen test games here
    # it learnt the order it was taught: train's positions paired by score, it gets most pairs right
    model, _ = load_model(tmp_path / "run" / "checkpoint.pt")
    by_score = PairBatches(folder / "train.parquet", LoaderConfig(batch_size=4096, shuffle=False), order="score")
    got = evaluate(model, by_score, get_encoder("bitmap773"), torch.device("cpu"), 2, 1.0, False)
    # (a coin gets half of 4,000 pairs right, give or take 1.6 points; six short epochs of a
    # regularised network on 300 games get about two thirds)
    assert got["rows"] == by_score.rows > 2000 and got["accuracy"] > 0.6, got
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] - 0.05
