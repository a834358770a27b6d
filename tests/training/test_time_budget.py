"""The training loop's time bound (max_minutes) and its one pass over test, on small synthetic
splits (random legal play, no Stockfish): a bounded run stops and says so, pretraining (DeepChess's
Pos2Vec, the piece values' autoencoder) stops at its share of the bound, and the test figures
(accuracy, both baselines, the leads and their intervals) equal an independent computation."""

import shutil
import time

import chess
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import dataset_dir
from pipeline.store.store import Store
from tests.training.conftest import QUIET
from tests.training.synthetic import white_material, write_dataset
from training.encoders import get_encoder
from training.train import PRETRAIN_SHARE, TrainConfig, load_model, train

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    st = Store(tmp_path_factory.mktemp("budget") / "store")
    for name in ("sabatelli_3class", "deepchess", "piece_values"):
        write_dataset(st, name, games=40, seed=3)
    return st


@pytest.fixture(scope="module")
def scored(store, tmp_path_factory):
    """An unbounded 2-epoch run of the 3-class MLP, and the split files its loaders read (in order)."""
    from training.data import ParquetBatches

    reads: list[str] = []
    epoch = ParquetBatches.epoch

    def counted(self, n=0):
        reads.append(self.path.stem)
        return epoch(self, n)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ParquetBatches, "epoch", counted)
        r = train(_config(store, tmp_path_factory.mktemp("scored"), epochs=2), log=QUIET)
    return r, reads


def test_the_modules_fixtures_and_tests_run_on_one_torch_thread(store):
    assert torch.get_num_threads() == 1  # tests/training/conftest.py's one_thread, set for the module


def _config(store: Store, out, **kw) -> TrainConfig:
    base = dict(store=str(store.root), device="cpu", threads=1, batch_size=32, out=str(out))
    return TrainConfig(**{**base, **kw})


def test_a_run_out_of_time_stops_and_says_so(store, tmp_path, scored):
    start = time.monotonic()
    r = train(_config(store, tmp_path / "m", epochs=500, patience=500, max_minutes=0.01), log=QUIET)  # 0.6 s
    assert r.stopped_by == "time budget" and r.epochs_asked == 500 and r.max_minutes == 0.01
    assert len(r.history) < 500
    assert r.stop_text().startswith(f"{len(r.history)} of 500 epoch(s), stopped by the time budget (0.01 min)")
    meta = r.stop_metadata()
    assert meta["stopped_by_time_budget"] and meta["epochs_asked"] == 500 and meta["stopped_by"] == "time budget"
    assert time.monotonic() - start < 60  # the bound, a test pass and loading; never 500 epochs
    load_model(r.checkpoint)  # the run's checkpoint is there
    # Unbounded, a run does every epoch it is asked for, and says that instead.
    full, _ = scored
    assert full.stopped_by == "epochs" and len(full.history) == 2 and not full.stop_metadata()["stopped_by_time_budget"]
    assert full.stop_text() == "2 of 2 epoch(s), every epoch asked for"


def test_a_bound_spent_before_the_first_step_records_no_epoch_but_leaves_this_runs_checkpoint(store, tmp_path):
    out = tmp_path / "m"
    train(_config(store, out, epochs=1, seed=1), log=QUIET)  # another configuration's checkpoint there
    r = train(_config(store, out, epochs=3, max_minutes=1e-9), log=QUIET)
    assert r.stopped_by == "time budget" and r.history == [] and r.stop_text().startswith("0 of 3 epoch(s)")
    ck = torch.load(r.checkpoint, weights_only=False)
    assert ck["config"]["seed"] == 0 and ck["epoch"] == -1 and ck["history"] == []  # this run's, not the old one
    assert "accuracy" in r.test


@pytest.mark.parametrize(
    "dataset, model, encoder",
    [("deepchess", "deepchess", "bitmap773"), ("piece_values", "piece_value_cp", "pieces837")],
)
def test_pretraining_stops_at_its_share_of_the_bound(store, tmp_path, dataset, model, encoder):
    minutes = 0.04  # 2.4 s: pretraining (200 epochs a layer asked) may take 1.2 s of it
    start = time.monotonic()
    r = train(
        _config(
            store,
            tmp_path / "m",
            dataset=dataset,
            model=model,
            encoder=encoder,
            epochs=200,
            patience=200,
            pretrain_epochs=200,
            max_minutes=minutes,
            max_eval_rows=256,
        ),  # fmt: skip
        log=QUIET,
    )
    took = time.monotonic() - start
    done = r.pretrain_done()
    assert len(done) == 4 and all(1 <= d < 200 for d in done), done  # each layer its part, none its 200 epochs
    assert r.pretrain_cut() and r.pretrain_epochs_asked == 200
    pretrain_seconds = sum(row["seconds"] for row in r.pretrain)
    # Each layer stops at its part of the share; one batch, and the layer's validation pass, over.
    assert pretrain_seconds < minutes * 60 * PRETRAIN_SHARE + 4 * 1.0, pretrain_seconds
    assert r.stopped_by == "time budget" and len(r.history) < 200
    assert f"cut by its time share ({minutes * PRETRAIN_SHARE:g} min)" in r.stop_text()
    assert took < minutes * 60 + 60  # the bound, then one test pass and loading


def _material_rule(m: np.ndarray) -> np.ndarray:
    """The 3-class material rule by hand: win or loss beyond +/-1.5 pawns (sabatelli_class3 on 100 x m)."""
    return np.where(m * 100 < -150, 0, np.where(m * 100 > 150, 2, 1))


def _clustered_interval(d: np.ndarray, games: np.ndarray) -> float:
    """1.96 x the cluster-robust standard error of the mean of d, games as clusters (by hand)."""
    lead = d.mean()
    sums = np.array([(d[games == g] - lead).sum() for g in np.unique(games)])
    g, n = len(sums), len(d)
    return 1.96 * np.sqrt((sums**2).sum() / n**2 * g / (g - 1))


def test_one_pass_over_test_gives_the_figures_of_an_independent_computation(store, scored):
    r, _ = scored
    t = r.test
    folder = dataset_dir(store, "sabatelli_3class")
    test = pq.read_table(folder / "test.parquet").to_pylist()
    train_y = pq.read_table(folder / "train.parquet", columns=["target"]).column(0).to_numpy().astype(int)
    y = np.array([row["target"] for row in test], dtype=int)
    games = np.array([row["game_id"] for row in test])
    # Material from python-chess boards rebuilt from each row (White's view: these rows are not mirrored).
    from pipeline.ingest.encoding import board_from_row

    boards = [board_from_row(r_["planes"], r_["side_to_move"], r_["castling"], None, 0, 1) for r_ in test]
    material = np.array([white_material(b) for b in boards])
    assert all(isinstance(b, chess.Board) for b in boards)
    # The model, run once over every test row in one batch.
    model, _ = load_model(r.checkpoint)
    from training.data import LoaderConfig, ParquetBatches

    (batch,) = ParquetBatches(folder / "test.parquet", LoaderConfig(batch_size=len(test), shuffle=False)).epoch(0)
    with torch.no_grad():
        right = model(get_encoder("bitmap768")(batch)).argmax(1).numpy() == y
    majority = int(np.bincount(train_y, minlength=3).argmax())
    by_majority, by_material = y == majority, _material_rule(material) == y
    assert t["rows"] == len(test) and t["majority_class"] == majority
    assert t["accuracy"] == pytest.approx(right.mean(), abs=1e-12)
    assert t["majority_class_accuracy"] == pytest.approx(by_majority.mean(), abs=1e-12)
    assert t["material_baseline_accuracy"] == pytest.approx(by_material.mean(), abs=1e-12)
    assert 0.3 < by_material.mean() < 1  # the rule is right on some rows and wrong on others here
    for name, other in (("majority", by_majority), ("material", by_material)):
        d = right.astype(float) - other.astype(float)
        assert t[f"{name}_lead"] == pytest.approx(d.mean(), abs=1e-12)
        assert t[f"{name}_lead_ci95"] == pytest.approx(_clustered_interval(d, games), rel=1e-9)
    assert t["lead_clusters"] == len(np.unique(games))


def test_the_test_split_is_read_once_for_the_model_the_baselines_and_the_leads(scored):
    _, reads = scored
    assert reads.count("test") == 1, reads  # it was three passes: the model, the baselines, the leads
    assert reads.count("val") == 2  # once an epoch


def test_a_cut_in_the_only_pretraining_epoch_asked_for_is_reported(store, tmp_path):
    # pretrain_epochs=1 (the quick profiles): a layer cut inside its one epoch has done no more
    # epochs than a layer that finished it, yet it was cut, and the run must say so.
    minutes = 0.002  # 0.12 s; pretraining's share 0.06 s, 15 ms a layer: the first layer's epoch is longer
    lines: list[str] = []
    r = train(
        _config(
            store,
            tmp_path / "m",
            dataset="piece_values",
            model="piece_value_cp",
            encoder="pieces837",
            epochs=1,
            pretrain_epochs=1,
            max_minutes=minutes,
            max_eval_rows=64,
        ),  # fmt: skip
        log=lines.append,
    )
    assert r.pretrain_done() == [1, 1, 1, 1] and r.pretrain_epochs_asked == 1
    assert f"cut by its time share ({minutes * PRETRAIN_SHARE:g} min)" in r.stop_text(), r.stop_text()
    assert r.pretrain_cut() and r.stop_metadata()["stopped_by_time_budget"] is True
    assert r.pretrain[0]["cut"] is True  # 837->600 over ~1,000 rows: never within 15 ms
    share = minutes * PRETRAIN_SHARE / 4  # each layer's part, in minutes
    assert f"pretrain layer 0: time share of {share:g} min used" in lines, lines


BAD_MINUTES = [-1.0, -5.0, float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("bad", BAD_MINUTES)
def test_a_bad_time_bound_is_refused_in_one_line_naming_the_valid_values(bad, tmp_path, capsys):
    with pytest.raises(ValueError) as e:
        TrainConfig(max_minutes=bad)
    text = str(e.value)
    assert "\n" not in text and "max_minutes" in text and repr(bad) in text and "0 (no bound)" in text
    for good in (0.0, 0.004, 3):
        assert TrainConfig(max_minutes=good).max_minutes == good
    # `python -m training.train`: argparse's one-line usage error, before anything is read.
    from training.train import main

    with pytest.raises(SystemExit) as ex:
        main(["--store", str(tmp_path / "store"), f"--max-minutes={bad}"])
    assert ex.value.code == 2 and "max_minutes" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("bad", BAD_MINUTES + [-0.5, -2.0])
def test_a_model_assets_run_config_takes_only_the_profiles_bound_or_a_bound_of_its_own(bad):
    from assets.training import TrainRunConfig, train_config

    with pytest.raises(ValueError) as e:
        train_config("mlp_bitmap_3class", TrainRunConfig(max_minutes=bad), "", "")
    text = str(e.value)
    assert "\n" not in text and "max_minutes" in text and repr(bad) in text
    assert "left out (the profile's)" in text and "0 (no bound)" in text
    # Left out takes the profile's (quick: 3 minutes), 0 no bound, a positive number itself.
    for given, got in ((None, 3.0), (0.0, 0.0), (0.5, 0.5)):
        assert train_config("mlp_bitmap_3class", TrainRunConfig(max_minutes=given), "", "").max_minutes == got


def test_the_one_pass_figures_survive_bfloat16_autocast(store, monkeypatch):
    """On CUDA the evaluation runs under bfloat16 autocast (amp); the per-row figures must still
    come out (numpy takes no bfloat16: a full-scale run on an H200 failed there after training).
    CPU autocast in bfloat16 stands in for CUDA's here, and the figures match the float32 pass."""
    from training import checkpoints

    cfg = dict(store=str(store.root), dataset="sabatelli_3class", model="mlp3", encoder="bitmap768", epochs=1)
    exact = train(TrainConfig(out=str(store.root / "m32"), device="cpu", **cfg), log=QUIET).test
    monkeypatch.setattr(checkpoints, "autocast", lambda device, amp: torch.autocast("cpu", dtype=torch.bfloat16))
    half = train(TrainConfig(out=str(store.root / "m16"), device="cpu", **cfg), log=QUIET).test
    assert half["material_baseline_accuracy"] == exact["material_baseline_accuracy"]  # material exact in either
    assert half["rows"] == exact["rows"] and "material_lead" in half and "majority_lead" in half


class _Clock:
    """training.train's clock: the real one plus an offset a test moves (the bound's end, on cue)."""

    def __init__(self):
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def test_a_run_the_bound_cut_within_an_epoch_resumes_to_the_weights_of_an_uninterrupted_one(store, tmp_path):
    """A bound that ends inside an epoch (the 2nd, after 3 of its batches): the run scores the model
    it has and says the epoch was cut; resumed without the bound, it redoes that epoch whole and
    ends where an unbounded run of the same configuration ends (before, it went on from the
    half-trained epoch as if it had finished)."""
    import training.train as train_module
    from training.data import ParquetBatches

    cfg = dict(epochs=3, patience=10, batch_size=16)
    whole = train(_config(store, tmp_path / "whole", **cfg), log=QUIET)
    clock, epoch = _Clock(), ParquetBatches.epoch

    def cut_in_second_epoch(self, n=0):
        for i, batch in enumerate(epoch(self, n)):
            if self.path.stem == "train" and n == 1 and i == 3:
                clock.offset += 3600  # an hour on: past the 30-minute bound
            yield batch

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ParquetBatches, "epoch", cut_in_second_epoch)
        mp.setattr(train_module, "time", clock)
        bounded = train(_config(store, tmp_path / "parts", max_minutes=30, **cfg), log=QUIET)
    assert bounded.stopped_by == "time budget" and len(bounded.history) == 2
    assert [h.get("cut", False) for h in bounded.history] == [False, True]
    assert bounded.history[1]["positions"] == 3 * 16 < whole.history[1]["positions"]
    assert bounded.stop_text().endswith(", the 2nd cut short by the bound"), bounded.stop_text()
    # The checkpoint: the cut epoch as the bounded run scored it, and the state that epoch began from.
    ck = torch.load(bounded.checkpoint, weights_only=False)
    assert ck["epoch"] == 1 and ck["history"] == bounded.history and not ck["stopped_early"]
    began = ck["resume"]
    assert began["epoch"] == 0 and began["history"] == bounded.history[:1]
    assert not all(torch.equal(ck["model"][k], began["model"][k]) for k in began["model"])  # 3 batches apart
    # Resumed with no epoch left to do (epochs=1): the checkpoint then holds what that run scored.
    shutil.copytree(tmp_path / "parts", tmp_path / "one")
    one = train(_config(store, tmp_path / "one", **{**cfg, "epochs": 1}), log=QUIET)
    assert one.epochs_run == 0 and one.history == bounded.history[:1]
    ck1 = torch.load(one.checkpoint, weights_only=False)
    assert ck1["resume"] is None and ck1["epoch"] == 0 and ck1["history"] == one.history
    assert all(torch.equal(ck1["best_model"][k], began["best_model"][k]) for k in began["best_model"])
    resumed = train(_config(store, tmp_path / "parts", **cfg), log=QUIET)
    assert resumed.resumed_from == 1 and resumed.epochs_run == 2 and resumed.stopped_by == "epochs"
    assert [h["val_loss"] for h in resumed.history] == [h["val_loss"] for h in whole.history]
    assert not any(h.get("cut") for h in resumed.history)
    a, b = (load_model(r.checkpoint)[0].state_dict() for r in (whole, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.test["accuracy"] == whole.test["accuracy"]
