"""train()'s `preset` hook (a ModelSpec in place of a named preset, as scripts/material_study.py
runs its variants) and the two ModelSpec fields only such variants use: count_logits and
class_weight."""

import dataclasses

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import dataset_dir
from pipeline.store.store import Store
from tests.training.conftest import QUIET
from tests.training.synthetic import write_dataset
from training.checkpoints import evaluate, load_checkpoint
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import ModelSpec, build_model
from training.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py

SMALL = ModelSpec("mlp", hidden=(16,), lr=1e-2)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    st = Store(tmp_path_factory.mktemp("hook") / "store")
    write_dataset(st, "sabatelli_3class", games=40, seed=5)
    return st


def _cfg(store: Store, out, **kw) -> TrainConfig:
    base = {"store": str(store.root), "dataset": "sabatelli_3class", "encoder": "bitmap768", "epochs": 2}
    return TrainConfig(**(base | {"patience": 5, "batch_size": 64, "device": "cpu", "out": str(out)} | kw))


def test_count_logits_add_a_linear_map_of_the_piece_counts():
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(SMALL, count_logits=True), (12, 8, 8), 3)
    board = torch.zeros(2, 12, 8, 8)
    board[0, 0, 1, :] = 1  # eight white pawns
    board[0, 10, 7, 3] = 1  # a black queen
    board[1, 3, 0, 0] = 1  # a white rook
    with torch.no_grad():
        model.counts.weight.copy_(torch.arange(36, dtype=torch.float32).reshape(3, 12))
        model.counts.bias.zero_()
        bits_part = model.net(board)
        expected = torch.tensor([[8 * 0 + 10, 8 * 12 + 22, 8 * 24 + 34], [3, 15, 27]], dtype=torch.float32)
        assert torch.allclose(model(board) - bits_part, expected)
    with pytest.raises(ValueError, match="count_logits reads the piece counts from 768 piece bits"):
        build_model(dataclasses.replace(SMALL, count_logits=True), (12,), 3)


def test_a_study_preset_trains_and_resumes_only_a_checkpoint_of_the_same_spec(store, tmp_path):
    spec = dataclasses.replace(SMALL, count_logits=True)
    r = train(_cfg(store, tmp_path, epochs=1), QUIET, preset=spec)
    ck = load_checkpoint(r.checkpoint)
    assert ck["config"]["preset"]["count_logits"] is True
    model = build_model(spec, (12, 8, 8), 3)
    model.load_state_dict(ck["best_model"])  # the spec's model, count map included
    logs: list[str] = []
    train(_cfg(store, tmp_path), logs.append, preset=dataclasses.replace(spec, dropout=0.1))
    assert any("holds another configuration: starting afresh" in line for line in logs)
    logs.clear()
    train(_cfg(store, tmp_path, epochs=3), logs.append, preset=dataclasses.replace(spec, dropout=0.1))
    assert any(line.startswith("resuming from") for line in logs)


def test_a_study_presets_checkpoint_loads_and_plays_as_its_own_spec(store, tmp_path):
    """A spec no preset is (here the named preset mlp3's shape without its dropout layers, whose
    layer numbering therefore differs) loads by the spec its checkpoint records, not the named one."""
    from training.checkpoints import load_model
    from training.evaluator import load_evaluator
    from training.models import PRESETS

    spec = dataclasses.replace(PRESETS["mlp3"], hidden=(32, 16), dropout=0.0)
    r = train(_cfg(store, tmp_path, epochs=1, model="mlp3"), QUIET, preset=spec)
    model, ck = load_model(r.checkpoint)
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())
    assert [p.shape[0] for p in model.parameters() if p.ndim == 2] == [32, 16, 3]
    import chess

    assert np.isfinite(load_evaluator(r.checkpoint).evaluate([chess.Board()])).all()


def test_class_weight_weighs_each_class_by_its_inverse_frequency(store, tmp_path):
    """With lr 0 the weights stay as initialised, so epoch 0's train loss is the initial model's
    cross entropy over train, weighted by n / (3 * count) per class (computed here by hand)."""
    frozen = dataclasses.replace(SMALL, lr=0.0, class_weight=True)
    r = train(_cfg(store, tmp_path, epochs=1, batch_size=100_000), QUIET, preset=frozen)
    train_file = dataset_dir(store, "sabatelli_3class") / "train.parquet"
    y = torch.from_numpy(pq.read_table(train_file, columns=["target"]).column(0).to_numpy().astype(np.int64))
    counts = torch.bincount(y, minlength=3).double()
    weight = counts.sum() / (3 * counts)
    torch.manual_seed(0)  # TrainConfig's seed: the same initial weights
    model = build_model(frozen, (12, 8, 8), 3).eval()
    rows = ParquetBatches(train_file, LoaderConfig(batch_size=100_000, shuffle=False))
    batch = next(iter(rows.epoch(0)))
    with torch.no_grad():
        logp = torch.log_softmax(model(get_encoder("bitmap768")(batch)).double(), 1)
    nll = -logp[torch.arange(len(y)), batch.target.long()]
    w = weight[batch.target.long()]
    assert r.history[0]["train_loss"] == pytest.approx(float((w * nll).sum() / w.sum()), rel=1e-5)
    # and the validation loss stays the plain cross entropy, as every run's
    val = evaluate(model, ParquetBatches(train_file.with_name("val.parquet"), LoaderConfig(4096, shuffle=False)),
                   get_encoder("bitmap768"), torch.device("cpu"), 3, 0.0, False)  # fmt: skip
    assert r.history[0]["val_loss"] == pytest.approx(val["loss"], rel=1e-5)


def test_a_checkpoint_loads_as_trained_after_its_named_preset_changes(store, tmp_path, monkeypatch):
    """Every run records the spec it trained, so changing a preset's widths later (as mlp_search
    went from 256 to 512) neither breaks loading its checkpoints nor resumes them; a checkpoint
    from before specs were recorded takes an MLP's widths from its own weights."""
    from training import models
    from training.checkpoints import load_model

    small = dataclasses.replace(models.PRESETS["mlp_search"], hidden=(24, 8))
    monkeypatch.setitem(models.PRESETS, "mlp_search", small)
    r = train(_cfg(store, tmp_path / "run", model="mlp_search", epochs=1), QUIET)
    ck = load_checkpoint(r.checkpoint)
    assert ck["config"]["hidden"] == [] and tuple(ck["config"]["preset"]["hidden"]) == (24, 8)
    legacy = tmp_path / "legacy.pt"
    torch.save({**ck, "config": {k: v for k, v in ck["config"].items() if k != "preset"}}, legacy)
    monkeypatch.setitem(models.PRESETS, "mlp_search", dataclasses.replace(small, hidden=(40, 4)))
    for path in (r.checkpoint, legacy):
        model, _ = load_model(path)
        assert [tuple(p.shape) for p in model.parameters() if p.dim() == 2] == [(24, 768), (8, 24), (3, 8)], path
    logs: list[str] = []
    train(_cfg(store, tmp_path / "run", model="mlp_search", epochs=2), logs.append)
    assert any("holds another configuration: starting afresh" in line for line in logs)
