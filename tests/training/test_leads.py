"""The lead of a model over a baseline on the same rows, and its 95% interval (training.train.paired_lead)."""

import statistics

import numpy as np
import pyarrow.parquet as pq

from pipeline.datasets.datasets import dataset_dir
from pipeline.store.store import Store
from tests.training.conftest import QUIET
from tests.training.synthetic import write_dataset
from training.train import TrainConfig, line_lead, paired_lead, train


def test_without_clusters_the_interval_is_the_textbook_paired_one():
    rng = np.random.default_rng(0)
    right, other = rng.random(500) < 0.8, rng.random(500) < 0.75
    lead, half = paired_lead(right, other)
    d = [int(a) - int(b) for a, b in zip(right, other, strict=True)]
    assert np.isclose(lead, statistics.fmean(d)) and np.isclose(lead, right.mean() - other.mean())
    assert np.isclose(half, 1.96 * statistics.stdev(d) / len(d) ** 0.5)


def test_a_game_of_copies_counts_as_one_observation():
    # 40 games of 25 positions each, every position of a game right or wrong together: the rows
    # carry the information of 40 games, so the interval is that of the 40 per-game differences,
    # five times (sqrt 25) wider than the one that takes each row for independent.
    rng = np.random.default_rng(1)
    per_game = rng.integers(-1, 2, size=40)  # -1, 0 or 1: the model wrong and the rule right, ...
    d = np.repeat(per_game, 25)
    right, other = d > 0, d < 0
    games = np.repeat(np.arange(40), 25)
    lead, clustered = paired_lead(right, other, games)
    _, rows = paired_lead(right, other)
    assert np.isclose(lead, per_game.mean())
    assert np.isclose(clustered, 1.96 * statistics.stdev(per_game.tolist()) / 40**0.5)
    assert clustered > 4.5 * rows


def test_no_interval_from_one_row_or_one_game():
    assert paired_lead(np.array([True]), np.array([False]))[1] == float("inf")
    assert paired_lead(np.array([True, True]), np.array([False, True]), np.array([7, 7]))[1] == float("inf")


def test_a_regression_lead_is_the_lines_mse_less_the_models_with_a_game_clustered_interval():
    # 30 games of 20 positions; the model's error is a per-game offset, so rows of one game err
    # together and the interval is that of the 30 per-game differences of squared errors.
    rng = np.random.default_rng(2)
    games = np.repeat(np.arange(30), 20)
    y = rng.random(600)
    material = rng.integers(-5, 6, 600).astype(np.float64)
    prediction = y + np.repeat(rng.normal(0, 0.05, 30), 20)
    a, b = 0.5, 0.03
    rows = {"target": y, "prediction": prediction, "material": material}
    got = line_lead(rows, a, b, games)
    line_mse = float((((a + b * material) - y) ** 2).mean())
    ours_mse = float(((prediction - y) ** 2).mean())
    assert np.isclose(got["material_line_lead"], line_mse - ours_mse)
    d = ((a + b * material) - y) ** 2 - (prediction - y) ** 2
    per_game = d.reshape(30, 20).mean(1)
    half = 1.96 * (((per_game - d.mean()) ** 2).sum() * 20**2 / 600**2 * 30 / 29) ** 0.5
    assert np.isclose(got["material_line_lead_ci95"], half)
    assert got["material_line_lead_ci95"] > line_lead(rows, a, b)["material_line_lead_ci95"]  # per row: narrower
    assert line_lead({"target": np.zeros(0)}, a, b) == {}


def test_a_regression_runs_lead_over_the_line_is_clustered_by_the_test_files_games(tmp_path):
    # The run's own figures: the lead is the line's MSE less the model's on the same test rows, and
    # its interval is clustered by the games of the test file (counted here from the file itself).
    st = Store(tmp_path / "store")
    write_dataset(st, "sabatelli_regression", games=20, seed=3)
    cfg = TrainConfig(store=str(st.root), dataset="sabatelli_regression", model="mlp_regression", hidden=[16],
                      encoder="bitmap768", epochs=1, batch_size=64, device="cpu", threads=1,
                      out=str(tmp_path / "run"))  # fmt: skip
    t = train(cfg, QUIET).test
    games = pq.read_table(dataset_dir(st, "sabatelli_regression") / "test.parquet", columns=["game_id"]).column(0)
    assert t["lead_clusters"] == len(set(games.to_pylist())) > 1
    assert np.isclose(t["material_line_lead"], t["material_baseline_mse"] - t["mse"], rtol=1e-4)
    assert 0 < t["material_line_lead_ci95"] < float("inf")
