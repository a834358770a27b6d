"""Loader and training loop on a real (small) labelled store: determinism, bounded memory,
overfitting a batch, resume equal to an uninterrupted run, and the CUDA path."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import SplitConfig, build_dataset, dataset_dir
from tests.stores import first_games, labelled_store
from training.checkpoints import evaluate
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import PRESETS, build_model
from training.train import TrainConfig, baseline_leads, load_model, train


@pytest.fixture(scope="module")
def store(tmp_path_factory, stockfish, fics_2022):
    """The first 24 games of a real FICS archive (averaging over 2000), labelled at depth 8."""
    tmp = tmp_path_factory.mktemp("train")
    st = labelled_store(tmp, first_games(fics_2022, 24, tmp / "src.pgn"), stockfish)
    for name, params in (("sabatelli_3class", {"min_elo": 1500}), ("lubeck_wdl", {})):
        stats = build_dataset(st, name, params, split=SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2))
        assert all(stats.rows.values()), stats.rows
    return st


def _numbered(tmp_path, rows=1000, group=64):
    """A split file whose targets number its rows, in small row groups."""
    planes = pa.array([bytes([i % 256]) * 96 for i in range(rows)], type=pa.binary(96))
    t = pa.table(
        {
            "planes": planes,
            "side_to_move": ["w"] * rows,
            "castling": pa.array([0] * rows, pa.uint8()),
            "target": pa.array(np.arange(rows, dtype=np.float64)),
        }
    )
    path = tmp_path / "train.parquet"
    pq.write_table(t, path, row_group_size=group)
    return path


def test_loader_gives_every_row_once_per_epoch_deterministically_in_bounded_memory(tmp_path):
    path = _numbered(tmp_path)
    cfg = LoaderConfig(batch_size=50, shuffle_buffer=200)
    a = ParquetBatches(path, cfg, seed=1)
    first = [b.target.tolist() for b in a.epoch(0)]
    assert sorted(x for b in first for x in b) == list(range(1000))
    assert a.max_buffered <= 200 + 64  # the buffer plus one row group, whatever the file size
    again = [b.target.tolist() for b in ParquetBatches(path, cfg, seed=1).epoch(0)]
    other_epoch = [b.target.tolist() for b in a.epoch(1)]
    other_seed = [b.target.tolist() for b in ParquetBatches(path, cfg, seed=2).epoch(0)]
    assert first == again and first != other_epoch and first != other_seed
    in_order = [
        x for b in ParquetBatches(path, LoaderConfig(batch_size=64, shuffle=False)).epoch(0) for x in b.target.tolist()
    ]
    assert in_order == list(range(1000))
    assert len(ParquetBatches(path, cfg, limit=120)) == 3


def test_a_small_model_overfits_one_batch(store):
    loader = ParquetBatches(dataset_dir(store, "lubeck_wdl") / "train.parquet", LoaderConfig(batch_size=64))
    batch = next(iter(loader.epoch(0)))
    enc = get_encoder("bitmap768")
    torch.manual_seed(0)
    model = build_model(PRESETS["mlp3"], enc.shape, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = enc(batch), batch.target.long()
    for _ in range(150):
        model.train()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert (model(x).argmax(1) == y).float().mean().item() == 1.0


def _weights(path):
    model, _ = load_model(path)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(store, tmp_path):
    base = dict(
        store=str(store.root),
        dataset="sabatelli_3class",
        model="mlp3",
        encoder="bitmap768",
        batch_size=16,
        patience=10,
        threads=1,
        device="cpu",
    )
    whole = train(TrainConfig(**base, epochs=3, out=str(tmp_path / "whole")), log=lambda s: None)
    train(TrainConfig(**base, epochs=1, out=str(tmp_path / "parts")), log=lambda s: None)
    resumed = train(TrainConfig(**base, epochs=3, out=str(tmp_path / "parts")), log=lambda s: None)
    assert resumed.resumed_from == 1 and resumed.epochs_run == 2
    a, b = _weights(whole.checkpoint), _weights(resumed.checkpoint)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [h["val_loss"] for h in whole.history] == [h["val_loss"] for h in resumed.history]
    ck = torch.load(whole.checkpoint, weights_only=False)
    assert ck["encoder"] == {"name": "bitmap768", "version": 1}
    assert ck["dataset"]["name"] == "sabatelli_3class" and set(ck["dataset"]["splits"]) == {"train", "val", "test"}
    assert "accuracy" in whole.test and len(whole.test["confusion"]) == 3


@pytest.mark.parametrize(
    "model,encoder,dataset",
    [
        ("cnn", "algebraic", "sabatelli_3class"),
        ("cnn_features", "features", "sabatelli_3class"),
        ("lubeck", "piece_list", "lubeck_wdl"),
        ("mlp_regression", "bitmap773", "lubeck_wdl"),
    ],
)
def test_other_architectures_train(store, tmp_path, model, encoder, dataset):
    r = train(
        TrainConfig(
            store=str(store.root),
            dataset=dataset,
            model=model,
            encoder=encoder,
            epochs=1,
            batch_size=32,
            hidden=(64, 64) if model != "cnn" else (),
            device="cpu",
            out=str(tmp_path / model),
        ),
        log=lambda s: None,
    )
    assert r.test["rows"] > 0 and np.isfinite(r.test["loss"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine (CPU-only torch build)")
def test_cuda_training_path(store, tmp_path):
    r = train(
        TrainConfig(
            store=str(store.root), dataset="sabatelli_3class", epochs=1, device="cuda", out=str(tmp_path / "cuda")
        ),
        log=lambda s: None,
    )
    assert r.device.startswith("cuda") and r.test["rows"] > 0


def _test_boards(store, dataset: str, n: int = 64) -> tuple[list[dict], list]:
    """The first n rows of the dataset's test split, and each as a python-chess board."""
    from pipeline.ingest.encoding import board_from_row

    rows = pq.read_table(dataset_dir(store, dataset) / "test.parquet").slice(0, n).to_pylist()
    fields = ("planes", "side_to_move", "castling", "ep_square", "halfmove_clock", "fullmove_number")
    return rows, [board_from_row(*(x[f] for f in fields)) for x in rows]


@pytest.mark.parametrize(
    "dataset,model,encoder", [("sabatelli_3class", "mlp3", "features"), ("lubeck_wdl", "lubeck", "bitmap768")]
)
def test_network_evaluator_scores_boards_as_the_model_saw_its_rows(store, tmp_path, dataset, model, encoder):
    """Boards from python-chess, encoded at play time, get the score the model gives the same
    positions read by the training loader (mirrored Black-to-move rows for side-to-move data)."""
    from training.evaluator import WDL_SCALE, NetworkEvaluator

    r = train(
        TrainConfig(
            store=str(store.root), dataset=dataset, model=model, encoder=encoder, epochs=1, out=str(tmp_path / "run")
        )
    )
    ck = torch.load(r.checkpoint, weights_only=False)
    assert ck["dataset"]["pov"] == ("side_to_move" if dataset.startswith("sabatelli") else "white")
    ev = NetworkEvaluator(r.checkpoint)
    assert ev.pov == ck["dataset"]["pov"]
    path = dataset_dir(store, dataset) / "test.parquet"
    batch = next(iter(ParquetBatches(path, LoaderConfig(batch_size=64, shuffle=False)).epoch(0)))
    with torch.no_grad():
        p = torch.softmax(ev.model(get_encoder(encoder)(batch)), dim=1).numpy()
    expected = WDL_SCALE * (p[:, 2] - p[:, 0])  # win minus loss, from the row's point of view
    rows, boards = _test_boards(store, dataset)
    got = ev.evaluate(boards)
    black = np.array([x["side_to_move"] == "b" for x in rows])
    assert black.any() and (~black).any()
    if ev.pov == "white":
        expected = np.where(black, -expected, expected)  # the evaluator answers for the side to move
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "params",
    [
        {"target_kind": "linear", "clip_cp": 500},
        {"target_kind": "win_prob", "wp_scale": 300.0},
    ],
)
def test_a_regression_target_maps_back_to_centipawns_by_the_parameters_its_rows_were_built_with(
    store, tmp_path, params
):
    """The checkpoint records the parameters its rows were built with (not the dataset's defaults:
    clip_cp 1500, wp_scale 400), and the player maps the target back by them: the linear target
    through its clip, the win probability through wp_scale x log10(p / (1 - p)), the inverse of
    the dataset's 1 / (1 + 10^(-cp / wp_scale))."""
    from pipeline.store.store import Store
    from training.evaluator import NetworkEvaluator

    built = Store(tmp_path / "built")
    split = SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2)
    build_dataset(store, "sabatelli_regression", {"min_elo": 1500, **params}, split=split, out=built)
    r = train(
        TrainConfig(
            store=str(built.root),
            dataset="sabatelli_regression",
            model="mlp_search",
            hidden=(32,),
            epochs=3,
            out=str(tmp_path / "run"),
        ),
        log=lambda s: None,
    )
    ck = torch.load(r.checkpoint, weights_only=False)
    assert {k: ck["dataset"]["params"][k] for k in params} == params
    if params["target_kind"] == "linear":  # the mean error in centipawns by the rows' own clip
        assert r.test["cp_mae"] == pytest.approx(r.test["mae"] * 1000.0)
    else:  # the win probability is not linear in centipawns: no such figure
        assert "cp_mae" not in r.test
    ev = NetworkEvaluator(r.checkpoint, sparse=False)
    rows, boards = _test_boards(built, "sabatelli_regression")
    batch = next(
        iter(
            ParquetBatches(
                dataset_dir(built, "sabatelli_regression") / "test.parquet", LoaderConfig(batch_size=64, shuffle=False)
            ).epoch(0)
        )
    )
    with torch.no_grad():
        out = ev.model(get_encoder("bitmap768")(batch))[:, 0].double().numpy()
    if params["target_kind"] == "linear":
        expected = out * 1000.0 - 500.0
    else:
        p = np.clip(out, 1e-6, 1 - 1e-6)
        expected = 300.0 * np.log10(p / (1 - p))
        # the map is the dataset's own inverse: a row's target goes back to its label's centipawns
        t = np.array([x["target"] for x in rows])
        cp = 300.0 * np.log10(t / (1 - t))
        assert np.allclose(1 / (1 + 10 ** (-cp / 300.0)), t)
    assert np.ptp(expected) > 1.0
    np.testing.assert_allclose(ev.evaluate(boards), expected, rtol=1e-4, atol=1e-2)  # side to move's view, as the rows


@pytest.mark.parametrize(
    "dataset,model",
    [
        ("sabatelli_3class", "mlp3"),  # ReLU and dropout; Black to move mirrored
        ("sabatelli_3class", "mlp_regression"),  # batch norm folded into its linear layer; ELU
        ("lubeck_wdl", "lubeck"),  # White's view: Black's scores negated
    ],
)
def test_an_mlp_on_bitmap768_plays_as_numpy_with_the_torch_models_scores(store, tmp_path, dataset, model):
    """On the CPU such an evaluator runs without torch (SparseMLP): for each board alone, as the
    capture search asks, and for a batch, the torch model's scores within float32 rounding."""
    from training.evaluator import NetworkEvaluator

    r = train(
        TrainConfig(
            store=str(store.root), dataset=dataset, model=model, hidden=(64, 32), epochs=1, out=str(tmp_path / "run")
        ),
        log=lambda s: None,
    )
    fast, slow = NetworkEvaluator(r.checkpoint), NetworkEvaluator(r.checkpoint, sparse=False)
    assert fast.sparse is not None and slow.sparse is None
    _, boards = _test_boards(store, dataset)
    assert {b.turn for b in boards} == {True, False}
    expected = slow.evaluate(boards)
    assert np.ptp(expected) > 1.0  # scores that differ, so a mix-up of rows would show
    np.testing.assert_allclose(fast.evaluate(boards), expected, rtol=1e-4, atol=1e-3)
    alone = np.array([fast.evaluate([b])[0] for b in boards])
    np.testing.assert_allclose(alone, expected, rtol=1e-4, atol=1e-3)


def test_only_an_mlp_on_bitmap768_plays_as_numpy(store, tmp_path):
    from training.evaluator import NetworkEvaluator

    r = train(
        TrainConfig(
            store=str(store.root), model="mlp3", encoder="features", hidden=(32,), epochs=1, out=str(tmp_path / "f")
        ),
        log=lambda s: None,
    )
    assert NetworkEvaluator(r.checkpoint).sparse is None  # another encoder: torch plays it


def test_the_material_mlp_trains_and_states_its_leads_over_the_baselines(store, tmp_path):
    # The demo's network (mlp_material on bitmap768_counts: weight decay, a-h mirroring) through the
    # same loop; its leads are the differences of the accuracies measured apart, on the test rows,
    # clustered by the test file's games.
    r = train(
        TrainConfig(
            store=str(store.root),
            model="mlp_material",
            encoder="bitmap768_counts",
            epochs=2,
            batch_size=32,
            device="cpu",
            out=str(tmp_path / "m"),
        ),
        log=lambda s: None,
    )
    t = r.test
    assert np.isclose(t["material_lead"], t["accuracy"] - t["material_baseline_accuracy"])
    assert np.isclose(t["majority_lead"], t["accuracy"] - t["majority_class_accuracy"])
    games = pq.read_table(dataset_dir(store, "sabatelli_3class") / "test.parquet", columns=["game_id"])
    assert t["lead_clusters"] == len(set(games.column(0).to_pylist()))
    assert 0 < t["material_lead_ci95"] < 1 and 0 <= t["majority_lead_ci95"] < 1  # 0: it always says draw
    ck = torch.load(r.checkpoint, weights_only=False)
    assert type(ck["optimizer"]["param_groups"][0]["weight_decay"]) is float
    assert ck["optimizer"]["param_groups"][0]["weight_decay"] == PRESETS["mlp_material"].weight_decay > 0


class _SaysDraw(torch.nn.Module):
    """Always class 1 (draw), whatever the position."""

    def forward(self, x):
        out = torch.zeros(len(x), 3)
        out[:, 1] = 1.0
        return out


def test_leads_say_when_no_game_grouping_applies(store):
    # Game ids matched to test rows by position: a list of the wrong length cannot be matched, so
    # the interval is per row and lead_clusters says 0 (no grouping), never the number of rows.
    path = dataset_dir(store, "sabatelli_3class") / "test.parquet"
    batches = ParquetBatches(path, LoaderConfig(batch_size=16, shuffle=False))
    encoder = get_encoder("bitmap768")
    games = pq.read_table(path, columns=["game_id"]).column(0).to_numpy()
    rows: dict = {}
    evaluate(_SaysDraw(), batches, encoder, torch.device("cpu"), 3, 0.0, False, rows)
    grouped = baseline_leads(rows, "sabatelli_3class", 1, games)
    assert grouped["lead_clusters"] == len(set(games.tolist())) > 1
    per_row = baseline_leads(rows, "sabatelli_3class", 1, None)
    mismatched = baseline_leads(rows, "sabatelli_3class", 1, games[:-1])
    assert per_row["lead_clusters"] == mismatched["lead_clusters"] == 0
    assert mismatched["material_lead_ci95"] == per_row["material_lead_ci95"] != grouped["material_lead_ci95"]
    assert per_row["majority_lead"] == 0.0  # it is the majority class (draw) itself
