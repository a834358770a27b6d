"""The dataset sabatelli_regression_search built by `chess-pipeline datasets` on a real
static-labelled store (100 FICS games): sabatelli_regression's rows as they are, then round by
round children of the rows before, none of them held out or repeated, each labelled as
Stockfish's own `eval` scores it (asked here directly, not through the project's evaluator);
the same build again, its engines failing now and then, gives the same rows; an engine that
never evaluates leaves the files as they were; the model asset mlp_search_regression trains on it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import chess
import chess.polyglot
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.ingest.encoding import fens_from_columns
from tests.engines import faulty_stockfish, static_cp
from tests.stores import first_games
from training.data import LoaderConfig, ParquetBatches

pytestmark = pytest.mark.slow

CLI = Path(sys.executable).parent / "chess-pipeline"
NAME = "sabatelli_regression_search"
BUILT = ["dataset", "materialised_at"]
"""Columns a build sets anew (which set, when)."""


def _run(*args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "CHESS_PIPELINE_DEBUG"} | env
    done = subprocess.run([*args], capture_output=True, text=True, env=environ, timeout=600)
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done


def _rounds(stdout: str) -> list[int]:
    line = next(x for x in stdout.splitlines() if x.startswith(f"{NAME}:"))
    return [int(n.replace(",", "")) for n in line.split("round by round: ")[1].split(";")[0].split(", ")]


@pytest.fixture(scope="module")
def built(tmp_path_factory, fics_2022):
    tmp = tmp_path_factory.mktemp("searched_dataset")
    pgn = tmp / "games.pgn"
    first_games(fics_2022, 100, pgn)
    home = [str(CLI), "--home", str(tmp / "store")]
    _run(*home, "ingest", str(pgn))
    _run(*home, "label", "--static")
    done = _run(*home, "datasets", "sabatelli_regression", NAME, "--static")
    return home, tmp / "store" / "datasets", done.stdout


def _table(folder: Path, split: str):
    return pq.read_table(folder / f"{split}.parquet")


def _boards(t) -> list[chess.Board]:
    cols = [t.column(k).to_pylist() for k in ("planes", "side_to_move", "castling", "ep_square")]
    return [chess.Board(f) for f in fens_from_columns(*cols)]


def _children(boards: list[chess.Board]) -> set[int]:
    """Every legal move's position of each board, by python-chess's own moves and key."""
    out = set()
    for parent in boards:
        for move in parent.legal_moves:
            parent.push(move)
            out.add(chess.polyglot.zobrist_hash(parent))
            parent.pop()
    return out


def test_rounds_of_children_of_the_rows_before_each_labelled_by_stockfishs_eval(built, stockfish):
    _, datasets, stdout = built
    base, grown = datasets / "sabatelli_regression", datasets / NAME
    # the same rows, the searched set's target the win probability (its default target_kind)
    same = [*BUILT, "target"]
    for split in ("val", "test"):
        mine, theirs = _table(grown, split), _table(base, split)
        assert mine.drop(same).equals(theirs.drop(same))
        assert mine.column("target").equals(theirs.column("win_prob"))
    train, rows = _table(base, "train"), _table(grown, "train")
    assert rows.slice(0, len(train)).drop(same).equals(train.drop(same))  # its rows first, as they were
    assert rows.slice(0, len(train)).column("target").equals(train.column("win_prob"))
    assert set(rows.column("dataset").to_pylist()) == {NAME} and len(set(rows.column("materialised_at"))) == 1
    rounds = _rounds(stdout)
    assert len(rounds) == 4 and all(rounds) and len(rows) == len(train) + sum(rounds)  # the default's four

    held = set(train.column("position_key").to_pylist())  # the game positions (some in many games)
    for split in ("val", "test"):
        held |= set(_table(base, split).column("position_key").to_pylist())
    added = rows.slice(len(train)).column("position_key").to_pylist()
    assert len(set(added)) == len(added) and not set(added) & held  # each once, none held out

    # Rounds 1 and 2: each row a child of a row before its round (rounds 3 and 4 grow the same way).
    before = _boards(train)
    for r, n in enumerate(rounds[:2]):
        start = len(before)
        new = _boards(rows.slice(start, n))
        assert len(new) == n and all(b.is_valid() and not b.is_check() and not b.is_game_over() for b in new)
        assert {chess.polyglot.zobrist_hash(b) for b in new} <= _children(before), f"round {r + 1}"
        assert n <= [2, 1][r] * start
        before += new

    new = rows.slice(len(train)).to_pydict()
    boards = _boards(rows.slice(len(train)))
    assert new["position_key"] == [chess.polyglot.zobrist_hash(b) for b in boards]  # the store's key
    step = max(1, len(boards) // 40)  # about 40 of them asked of Stockfish directly
    white_cp = np.array([static_cp(stockfish, b.fen()) for b in boards[::step]])
    assert np.array_equal(np.array(new["cp_white"][::step]), white_cp)
    stm_cp = np.where([b.turn == chess.WHITE for b in boards[::step]], white_cp, -white_cp)
    np.testing.assert_allclose(new["linear"][::step], (np.clip(stm_cp, -1500, 1500) + 1500) / 3000, atol=1e-12)
    np.testing.assert_allclose(new["target"][::step], 1 / (1 + 10 ** (-stm_cp / 400)), atol=1e-12)
    assert np.array_equal(np.array(new["mirrored"]), np.array(new["side_to_move"]) == "b")
    score = np.array(new["score"])
    assert np.array_equal(score, np.where(np.array(new["mirrored"]), -1, 1) * np.array(new["cp_white"]))
    np.testing.assert_allclose(new["win_prob"], 1 / (1 + 10 ** (-score / 400)))
    assert all(v is None for v in new["game_id"])

    loader = ParquetBatches(grown / "train.parquet", LoaderConfig(batch_size=4096, shuffle=False))
    assert sum(len(b.target) for b in loader.epoch(0)) == len(rows)


@pytest.mark.parametrize("mode", ["crash", "garbage"])
def test_an_engine_that_fails_now_and_then_is_retried_and_the_rows_are_the_same(built, tmp_path, stockfish, mode):
    """The same build again, each of its 2 engine processes crashing (or garbling its figure) at
    its 1,000th evaluation (of about 8,000 each; a crashed one's successor again at its own
    1,000th): the pool retries that child, and the set comes out as the clean build's, row for
    row (so a build is reproducible, faults or none)."""
    home, datasets, stdout = built
    first = {s: _table(datasets / NAME, s).drop(BUILT) for s in ("train", "val", "test")}
    engine = faulty_stockfish(tmp_path, stockfish, mode, n=1000)
    again = _run(*home, "datasets", NAME, "--workers", "2", STOCKFISH_PATH=engine)
    assert len(Path(f"{engine}.faults").read_text().splitlines()) >= 2  # each engine failed
    assert _rounds(again.stdout) == _rounds(stdout) and "left out" not in again.stdout
    for s, table in first.items():
        assert _table(datasets / NAME, s).drop(BUILT).equals(table), s


def test_an_engine_that_never_evaluates_fails_the_build_in_one_line_and_leaves_the_files(built, tmp_path, stockfish):
    home, datasets, _ = built
    files = {p.name: p.read_bytes() for p in (datasets / NAME).glob("*.parquet")}
    engine = faulty_stockfish(tmp_path, stockfish, "garbage", n=1, every=True)
    done = _run(*home, "datasets", NAME, check=False, STOCKFISH_PATH=engine)
    assert done.returncode != 0
    err = done.stderr.strip()  # Dagster's own ERROR lines (the step, the run) and then the CLI's one line
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith(f"chess-pipeline: datasets failed: {NAME}: "), err
    assert "gave no static evaluation for any of round 1's" in last and "+zz.q" in last
    assert last.endswith("(the dataset's files were not changed)")
    assert {p.name: p.read_bytes() for p in (datasets / NAME).glob("*.parquet")} == files


def test_the_model_asset_trains_on_every_row_of_the_grown_set_and_its_checkpoint_plays(built):
    """`chess-pipeline train mlp_search_regression`: 768-512-32-1 (mlp_search) on every grown train
    row (the full profile), tested on sabatelli_regression's test positions in centipawns, its
    figures in model_metrics; the checkpoint is one the search's evaluator loads and scores."""
    from training.evaluator import load_evaluator

    home, datasets, _ = built
    rows = {s: _table(datasets / NAME, s).num_rows for s in ("train", "test")}
    done = _run(*home, "train", "mlp_search_regression", "--profile", "full", "--epochs", "1", "--device", "cpu")
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("mlp_search_regression: test MSE")]
    assert f"on {rows['test']:,} test positions; 1 epochs on {rows['train']:,} rows" in line, line
    assert "cp MAE" not in line  # the win probability is no linear map of centipawns
    sql = "SELECT dataset, metric, value FROM model_metrics WHERE model = 'mlp_search_regression' AND split = 'test'"
    got = json.loads(_run(*home, "sql", sql, "--format", "json").stdout)
    metrics = {r["metric"]: r["value"] for r in got}
    assert {r["dataset"] for r in got} == {NAME} and metrics["rows"] == rows["test"]
    assert "cp_mae" not in metrics and metrics["mse"] > 0 and "mean_baseline_mse" in metrics, metrics
    (checkpoint,) = (Path(home[2]) / "models" / "mlp_search_regression").glob("*/checkpoint.pt")
    ck = torch.load(checkpoint, weights_only=False, map_location="cpu")
    config = ck["config"]
    assert (config["dataset"], config["model"], config["encoder"]) == (NAME, "mlp_search", "bitmap768")
    shapes = [tuple(w.shape) for k, w in ck["model"].items() if k.endswith(".weight")]
    assert shapes == [(512, 768), (32, 512), (1, 32)]  # 768-512-32-1
    # The search's evaluator (numpy, side to move's centipawns of the win probability) on the test
    # positions, taken back to the win probability, errs by the MSE training measured in torch:
    # the checkpoint plays the network that was scored (its outputs held inside (0, 1) by then).
    test = _table(datasets / NAME, "test")
    scores = load_evaluator(checkpoint).evaluate(_boards(test))
    mse = np.mean((1 / (1 + 10 ** (-scores / 400)) - np.array(test.column("target").to_pylist())) ** 2)
    assert abs(mse - metrics["mse"]) < 1e-3 * metrics["mse"], (mse, metrics)


CLASSED = "sabatelli_3class_search"


def test_the_3class_set_grows_by_the_same_children_each_given_its_class_by_the_sets_rule(built):
    """sabatelli_3class_search: sabatelli_3class's rows as they are, then one round of 2 children
    a row, the very children (keys and Stockfish's figures) of sabatelli_regression_search's first
    round, whose rows are the same positions; each child's target is its class by Sabatelli's
    edges (+/-1.5 pawns of the side to move's score), worked out here from its figure."""
    home, datasets, _ = built
    done = _run(*home, "datasets", "sabatelli_3class", CLASSED, "--static")
    base, grown, regression = datasets / "sabatelli_3class", datasets / CLASSED, datasets / NAME
    for split in ("val", "test"):
        assert _table(grown, split).drop(BUILT).equals(_table(base, split).drop(BUILT))
    train, rows = _table(base, "train"), _table(grown, "train")
    n = len(train)
    assert rows.slice(0, n).drop(BUILT).equals(train.drop(BUILT))
    line = next(x for x in done.stdout.splitlines() if x.startswith(f"{CLASSED}:"))
    (added,) = [int(x.replace(",", "")) for x in line.split("round by round: ")[1].split(";")[0].split(", ")]
    assert added and len(rows) == n + added

    reg = _table(regression, "train")
    assert reg.slice(0, n).column("position_key").equals(train.column("position_key"))
    new, same = rows.slice(n).to_pydict(), reg.slice(n, added).to_pydict()
    for column in ("position_key", "cp_white", "score", "mirrored", "planes"):
        assert new[column] == same[column], column
    score = np.array(new["score"])
    assert np.array_equal(score, np.where(np.array(new["mirrored"]), -1, 1) * np.array(new["cp_white"]))
    expected = np.where(score < -150, 0, np.where(score > 150, 2, 1))
    assert rows.schema.field("target").type == train.schema.field("target").type
    assert np.array_equal(np.array(new["target"]), expected) and set(expected) == {0, 1, 2}
    assert all(v is None for v in new["game_id"])


def test_a_class_macro_that_does_not_give_the_game_rows_targets_is_refused(built, stockfish, monkeypatch):
    """The children get their class by DatasetSpec.class_macro; one that does not give the set's own
    game rows their targets (here the 15-class macro for the 3-class set) stops the build before
    any child is drawn, and names the field to fix."""
    from dataclasses import replace

    from pipeline.datasets import datasets as ds
    from pipeline.labels.pool import EnginePool
    from pipeline.store.store import Store

    home, datasets, _ = built
    monkeypatch.setitem(ds.DATASETS, CLASSED, replace(ds.DATASETS[CLASSED], class_macro="sabatelli_class15"))
    before = {p.name: p.read_bytes() for p in (datasets / CLASSED).glob("*.parquet")}
    with EnginePool(stockfish, workers=1) as pool:
        with pytest.raises(ValueError, match=r"sabatelli_class15\(score\) does not give its game rows' targets"):
            ds.build_dataset(Store(Path(home[2])), CLASSED, {"label_kind": "static"}, engine=ds.SearchEngine(pool))
    assert {p.name: p.read_bytes() for p in (datasets / CLASSED).glob("*.parquet")} == before
