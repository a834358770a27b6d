"""training.held_out: a model trained on one archive's store, scored on another store's archive
with its own test split's figures; checked against the model's own test figures and a direct
evaluation of the same set built in the other store, and its refusals."""

import re
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import SPLITS, SplitConfig, build_dataset, dataset_dir
from pipeline.labels.labels import LabelRun, label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.research.intervals import MeanInterval
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
from training.checkpoints import evaluate, load_model
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.held_out import HeldOutError, compare, difference, table_text
from training.train import TrainConfig, train

pytestmark = pytest.mark.slow

SPLIT = SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2)
PARAMS = {"min_elo": 1500, "label_value": 1, "target_kind": "win_prob"}


def _store(folder, source, games, stockfish, split=SPLIT):
    """The first games of a real archive, labelled at depth 1, sabatelli_regression built."""
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", first_games(source, games, folder / "src.pgn"))
    with EnginePool(stockfish, workers=1) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 1)))
    build_dataset(store, "sabatelli_regression", PARAMS, split=split)
    return store


@pytest.fixture(scope="module")
def trained(tmp_path_factory, stockfish, fics_2022, fics_search):
    tmp = tmp_path_factory.mktemp("held_out")
    own = _store(tmp / "own", fics_2022, 24, stockfish)
    # the other archive's set built in its own store, no guard: every row, against which the
    # rows the tool builds (in a folder of its own) are checked
    other = _store(tmp / "other", fics_search, 10, stockfish, SplitConfig(guard=False))
    r = train(
        TrainConfig(
            store=str(own.root), dataset="sabatelli_regression", model="mlp_search", epochs=2, out=str(tmp / "m")
        ),
        log=lambda s: None,
    )
    return own, other, r


def test_test_split_figures_are_the_models_own_and_held_out_rows_are_the_other_stores(trained):
    own, other, r = trained
    files = lambda: {f: f.stat().st_mtime_ns for f in other.root.rglob("*") if f.is_file()}  # noqa: E731
    before, said = files(), []
    test, every, unseen = compare(str(r.checkpoint), str(other.root), log=said.append)
    assert said[0].startswith(f"{other.root}: ") and said[0].endswith(
        " candidate positions of sabatelli_regression labelled"
    )
    assert files() == before  # the other store is read, never written
    # its own test split: the very figures its training run reported
    assert test.rows == r.test["rows"]
    assert test.metric.mean == pytest.approx(r.test["mse"], rel=1e-5)
    assert test.material == pytest.approx(r.test["material_baseline_mse"], rel=1e-6)
    assert test.lead == pytest.approx(r.test["material_line_lead"], rel=1e-5)
    assert test.metric.low <= test.metric.mean <= test.metric.high
    # every position of the other store: its own set's three split files, each evaluated directly
    model, ck = load_model(r.checkpoint)
    encoder = get_encoder(ck["encoder"]["name"])
    folder = dataset_dir(other, "sabatelli_regression")
    n, squared = 0, 0.0
    for s in SPLITS:
        b = ParquetBatches(folder / f"{s}.parquet", LoaderConfig(batch_size=512, shuffle=False))
        m = evaluate(model, b, encoder, torch.device("cpu"), 0, 0.0, False)
        n, squared = n + m["rows"], squared + m.get("mse", 0.0) * m["rows"]
    games = {
        g for s in SPLITS for g in pq.read_table(folder / f"{s}.parquet", columns=["game_id"]).column(0).to_pylist()
    }
    assert (every.rows, every.games) == (n, len(games))
    assert every.metric.mean == pytest.approx(squared / n, rel=1e-5)
    # less the positions the model's train and val hold
    seen = set()
    for s in ("train", "val"):
        seen |= set(
            pq.read_table(dataset_dir(own, "sabatelli_regression") / f"{s}.parquet").column("position_key").to_pylist()
        )
    keys = [k for s in SPLITS for k in pq.read_table(folder / f"{s}.parquet").column("position_key").to_pylist()]
    assert unseen.rows == sum(k not in seen for k in keys) < every.rows  # the start position, at least
    text = table_text([test, every, unseen]).splitlines()
    assert len(text) == 5 and text[2].startswith(f"| test split | {test.rows:,} | {test.games:,} | ")
    for held, t in zip((every, unseen), text[3:], strict=True):
        where, less = t.split(" | ")[-2:]  # the last cells: "inside |"... and "+d (low to high) |"
        assert (where == "worse") == (held.metric.mean > test.metric.high)
        assert (where == "inside") == (test.metric.low <= held.metric.mean <= test.metric.high)
        d, low, high = map(float, re.fullmatch(r"([+-][\d.]+) \(([+-][\d.]+) to ([+-][\d.]+)\) \|", less).groups())
        assert d == pytest.approx(held.metric.mean - test.metric.mean, abs=1e-5) and low < d < high
    done = subprocess.run(
        [sys.executable, "-m", "training.held_out", "--checkpoint", str(r.checkpoint), "--store", str(other.root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.splitlines() == text, done.stderr


def test_a_store_without_the_labels_or_the_models_set_rebuilt_is_refused_in_one_line(trained, tmp_path, fics_search):
    own, other, r = trained
    with pytest.raises(HeldOutError, match=r"no store at .*: ingest the held-out archives there first"):
        compare(str(r.checkpoint), str(tmp_path / "none"))
    bare = Store(tmp_path / "bare").ensure()  # games, no labels
    add_pgn(bare, tmp_path, "games.pgn", first_games(fics_search, 4, tmp_path / "src.pgn"))
    with pytest.raises(HeldOutError, match=r"gives no rows for sabatelli_regression: the store has no labels yet"):
        compare(str(r.checkpoint), str(bare.root))
    done = subprocess.run(
        [sys.executable, "-m", "training.held_out", "--checkpoint", str(tmp_path / "none.pt"), "--store", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr.strip()
        == f"error: no checkpoint at {tmp_path / 'none.pt'}: train one first (chess-pipeline train ...)"
    )
    # the model's own set rebuilt after it trained: its test split is no longer the model's
    build_dataset(own, "sabatelli_regression", PARAMS, split=SplitConfig(seed=1, val_fraction=0.2, test_fraction=0.2))
    try:
        with pytest.raises(HeldOutError, match="rebuilt after this model trained on it"):
            compare(str(r.checkpoint), str(other.root))
    finally:
        build_dataset(own, "sabatelli_regression", PARAMS, split=SPLIT)
    assert np.isfinite(compare(str(r.checkpoint), str(other.root))[0].metric.mean)


def test_the_difference_adds_the_two_sets_variances():
    held = MeanInterval(1.0, 1.0 - 1.96 * 3, 1.0 + 1.96 * 3, 10)  # standard error 3
    test = MeanInterval(0.0, -1.96 * 4, 1.96 * 4, 10)  # standard error 4
    d, low, high = difference(held, test)
    assert (d, low, high) == pytest.approx((1.0, 1.0 - 1.96 * 5, 1.0 + 1.96 * 5))
