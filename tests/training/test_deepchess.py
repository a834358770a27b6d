"""DeepChess on real games: shapes, pairs inside splits, layer-wise pretraining, the trained
comparator's antisymmetry, the material baseline, Experiment 1's buckets and the STS ranking."""

import json

import chess
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import SPLITS, SplitConfig, build_dataset, dataset_dir
from pipeline.research.intervals import mean_interval, two_way_interval
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
from tests.training.conftest import QUIET
from training.autoencoder import PretrainConfig, StackedEncoder, encoded_inputs, pretrain_stack, reconstruction_loss
from training.checkpoints import evaluate
from training.data import LoaderConfig
from training.deepchess import (
    LEFT,
    RIGHT,
    Comparator,
    DeepChess,
    MaterialBaseline,
    PairBatches,
    bucket_accuracy,
    material,
    pair_scores,
    run_figures,
    solution_ranking,
    static_class,
)
from training.encoders import get_encoder
from training.models import PRESETS, build_model
from training.train import TrainConfig, load_model, train

ENC = get_encoder("bitmap773")
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


@pytest.fixture(scope="module")
def dc_store(tmp_path_factory, fics_2022) -> Store:
    """The first 1,000 games of a real FICS archive, their `deepchess` set (10 positions a game)."""
    tmp = tmp_path_factory.mktemp("deepchess")
    store = Store(tmp / "store").ensure()
    text = first_games(fics_2022, 1000, tmp / "games.pgn")
    add_pgn(store, tmp, "games.pgn", text)
    build_dataset(store, "deepchess", {}, SplitConfig(val_fraction=0.15, test_fraction=0.15))
    return store


@pytest.fixture(scope="module")
def trained(dc_store, tmp_path_factory):
    """A quick run of the shared loop, shared by the tests below: 1 pretraining epoch a layer, 2
    epochs on pairs of 32 (about 180 steps; 140 or 90 steps in batches of 64 or 128 left it on
    the 50% plateau on one build of this data and not on another, so not fewer)."""
    out = tmp_path_factory.mktemp("dc_run")
    cfg = TrainConfig(
        store=str(dc_store.root),
        dataset="deepchess",
        model="deepchess",
        encoder="bitmap773",
        epochs=2,
        pretrain_epochs=1,
        patience=5,
        batch_size=32,
        device="cpu",
        threads=1,
        out=str(out),
    )
    return cfg, train(cfg, log=QUIET)


def split(store: Store, name: str) -> str:
    return str(dataset_dir(store, "deepchess") / f"{name}.parquet")


def test_comparator_shapes_and_pair_batches(dc_store):
    torch.manual_seed(0)
    model = build_model(PRESETS["deepchess"], ENC.shape, 2)
    assert isinstance(model, DeepChess)
    assert model.pos2vec.widths == (773, 600, 400, 200, 100)
    assert [m.out_features for m in model.head if isinstance(m, torch.nn.Linear)] == [400, 200, 100, 2]
    assert model.head[0].in_features == 200  # two 100-wide codes side by side
    pairs = PairBatches(split(dc_store, "train"), LoaderConfig(batch_size=32))
    batch = next(pairs.epoch(0))
    x = ENC(batch)
    assert x.shape == (64, 773) and batch.target.shape == (32,)
    assert model(x).shape == (32, 2)
    assert model.embed(x).shape == (64, 100)
    with pytest.raises(ValueError, match="even count"):
        model(x[:63])
    # the towers share weights: swapping left and right swaps the codes the head sees
    left, right = model.embed(x[:32]), model.embed(x[32:])
    assert torch.allclose(model(torch.cat([x[32:], x[:32]])), model.compare(right, left), atol=1e-6)


def test_pairs_are_a_white_win_and_a_black_win_of_one_split_resampled_each_epoch(dc_store):
    games = {s: set(pq.read_table(split(dc_store, s), columns=["game_id"]).column(0).to_pylist()) for s in SPLITS}
    assert not games["train"] & games["test"] and not games["train"] & games["val"] and not games["val"] & games["test"]
    for s in SPLITS:
        pairs = PairBatches(split(dc_store, s), LoaderConfig(batch_size=128))
        ids = pairs.game_ids()
        target = pq.read_table(split(dc_store, s), columns=["target"]).column(0).to_numpy()
        assert pairs.rows == min((target == 1).sum(), (target == 0).sum()) > 0
        seen = []
        for epoch in range(3):
            left, right, y = pairs.pairs(epoch)
            white_won = np.where(y == LEFT, left, right)
            black_won = np.where(y == LEFT, right, left)
            assert (target[white_won] == 1).all() and (target[black_won] == 0).all()
            assert set(ids[left]) | set(ids[right]) <= games[s]  # game ids of this split only
            for other in set(SPLITS) - {s}:
                assert not (set(ids[left]) | set(ids[right])) & games[other]
            assert 0.35 < (y == RIGHT).mean() < 0.65  # order randomised
            seen.append(left.copy())
        assert not np.array_equal(seen[0], seen[1])  # re-sampled every epoch
        fixed = PairBatches(split(dc_store, s), LoaderConfig(batch_size=128, shuffle=False))
        assert np.array_equal(fixed.pairs(0)[0], fixed.pairs(5)[0])  # val/test: the same pairs each time


def test_layer_wise_pretraining_lowers_each_layers_reconstruction_loss(dc_store):
    torch.manual_seed(0)
    positions = PairBatches(split(dc_store, "train"), LoaderConfig(batch_size=128), limit=768).positions
    data = encoded_inputs(positions, ENC, "cpu")
    stack = StackedEncoder((773, 600, 400, 200, 100))
    for k in range(4):
        fresh = pretrain_stack(stack, data, PretrainConfig(epochs=0), layers=[k], log=QUIET).decoders[k]
        before = reconstruction_loss(stack, fresh, k, data(0), "cpu")
        with torch.no_grad():  # BCE against targets in (0, 1) cannot go below their entropy
            t = torch.cat([stack(x, k) for x in data(0)]).clamp(1e-7, 1 - 1e-7)
            floor = (-(t * t.log() + (1 - t) * (1 - t).log())).mean().item()
        done = pretrain_stack(stack, data, PretrainConfig(epochs=2), layers=[k], log=QUIET)
        after = reconstruction_loss(stack, done.decoders[k], k, data(0), "cpu")
        assert after - floor < 0.6 * (before - floor), (k, floor, before, after)
        assert [r["layer"] for r in done.history] == [k, k]
        assert done.history[1]["lr"] == pytest.approx(5e-3 * 0.98)  # Adam 5e-3, x0.98 per epoch


def test_layer_wise_pretraining_trains_only_its_layer():
    torch.manual_seed(0)
    x = (torch.rand(256, 20) < 0.3).float()
    stack = StackedEncoder((20, 12, 6))
    w0, w1 = stack.layers[0].weight.clone(), stack.layers[1].weight.clone()
    pretrain_stack(stack, lambda e: [x], PretrainConfig(epochs=3), layers=[1], log=QUIET)
    assert torch.equal(stack.layers[0].weight, w0) and not torch.equal(stack.layers[1].weight, w1)
    with pytest.raises(ValueError, match="only pretrain its first layer"):
        pretrain_stack(StackedEncoder((20, 12, 6), "relu"), lambda e: [x], PretrainConfig(epochs=1), log=QUIET)


def flip_rate(model, pairs) -> float:
    """Share of pairs whose answer flips when left and right are swapped."""
    flips, n = 0, 0
    with torch.no_grad():
        for batch in pairs.epoch(0):
            x = ENC(batch)
            h = x.shape[0] // 2
            a = model(x).argmax(1)
            b = model(torch.cat([x[h:], x[:h]])).argmax(1)
            flips += (a != b).sum().item()
            n += h
    return flips / n


def test_trained_comparator_is_antisymmetric_in_most_pairs(dc_store, trained):
    cfg, result = trained
    test = PairBatches(split(dc_store, "test"), LoaderConfig(batch_size=512, shuffle=False))
    model, _ = load_model(result.checkpoint)
    torch.manual_seed(1)
    untrained = build_model(PRESETS["deepchess"], ENC.shape, 2).eval()
    ours, fresh = flip_rate(model, test), flip_rate(untrained, test)
    assert ours >= 0.8, ours  # measured 0.94 and 0.97 on two builds of this data
    assert fresh < 0.8, fresh  # measured 0.00: an untrained comparator answers by its biases, whatever the order


def accuracy_where_material_is_equal(model, baseline, pairs) -> tuple[float, float, int]:
    """(model's accuracy, baseline's accuracy, pairs) over the pairs whose two positions have
    the same material: there the baseline can only guess."""
    ours = base = n = 0
    with torch.no_grad():
        for batch in pairs.epoch(0):
            m = material(batch)
            h = len(m) // 2
            same = m[:h] == m[h:]
            y = batch.target.long()
            ours += ((model(ENC(batch)).argmax(1) == y) & same).sum().item()
            base += (((baseline.logits(batch) > 0).long() == y) & same).sum().item()
            n += same.sum().item()
    return ours / n, base / n, n


def test_quick_run_beats_the_material_baseline_on_held_back_pairs_of_equal_material(dc_store, trained):
    """Overall, on this little data (about 5,850 train positions) the quick run is below the baseline
    (63% against 70% on test; on the 9,541-game store of docs/results/training.md a finished quick schedule
    beats it by 2.9 points), so the test holds the model to what material cannot tell: pairs of
    equal material, where the baseline guesses."""
    cfg, result = trained
    assert result.pretrain and {r["layer"] for r in result.pretrain} == {0, 1, 2, 3}
    assert [h["epoch"] for h in result.history] == [0, 1]
    ck = torch.load(result.checkpoint, weights_only=False)
    assert ck["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-3 * 0.98)  # x0.98 each epoch
    assert ck["pretrain"] == result.pretrain  # kept for a resumed run's report
    train_pairs = PairBatches(split(dc_store, "train"), LoaderConfig(batch_size=cfg.batch_size), seed=cfg.seed)
    baseline = MaterialBaseline.fit(train_pairs)
    assert baseline.b < 0  # more material on the left: less likely that the right one won
    model, _ = load_model(result.checkpoint)
    held = [PairBatches(split(dc_store, s), LoaderConfig(batch_size=4096, shuffle=False)) for s in ("val", "test")]
    assert result.test["rows"] == held[1].rows  # the model's test figure is over these very pairs
    got = [accuracy_where_material_is_equal(model, baseline, p) for p in held]
    n = sum(g[2] for g in got)
    ours = sum(g[0] * g[2] for g in got) / n
    base = sum(g[1] * g[2] for g in got) / n
    assert n > 200 and abs(base - 0.5) < 0.06, (base, n)
    assert ours > base + 0.05, (ours, base, n)  # measured: 0.594 against 0.515 over 342 pairs
    assert result.test["accuracy"] > 0.55  # and clear of chance on all test pairs (measured 0.626)


def test_material_is_whites_minus_blacks_in_pawns():
    from pipeline.play.search import board_arrays
    from training.encoders import Batch

    boards = [
        chess.Board(),
        chess.Board("4k3/8/8/8/8/8/8/QR2K3 w - - 0 1"),
        chess.Board("4k2r/8/8/8/8/8/8/4K3 b - - 0 1"),
    ]
    planes, white, castling = board_arrays(boards)
    w = torch.from_numpy(white)
    m = material(Batch(torch.from_numpy(planes), w, torch.from_numpy(castling), torch.zeros_like(w)))
    assert m.tolist() == [0.0, 14.0, -5.0]


@pytest.mark.parametrize(
    "cp, cls",
    [
        (0, "even"),
        (5, "even"),
        (-5, "even"),
        (6, None),
        (499, None),
        (500, "white_adv"),
        (-500, "black_adv"),
        (None, None),
    ],
)
def test_static_classes_use_the_published_thresholds(cp, cls):
    assert static_class(cp) == cls


def test_buckets_pair_white_won_and_black_won_positions_of_the_named_classes(dc_store, trained):
    _, result = trained
    model, ck = load_model(result.checkpoint)
    comparator = Comparator(model, ENC)
    pairs = PairBatches(split(dc_store, "test"), LoaderConfig(batch_size=4096, shuffle=False))
    n = pairs.positions_rows
    cp = np.full(n, np.nan)
    cp[pairs.white_won[:30]] = 600  # White-won positions with a White advantage
    cp[pairs.white_won[30:50]] = 0
    cp[pairs.black_won[:25]] = -700
    cp[pairs.black_won[25:35]] = 3
    got = bucket_accuracy(comparator, pairs, cp, max_pairs=1000)
    assert {k: (b.pairs, b.left_positions, b.right_positions) for k, b in got.items()} == {
        "A_even_even": (10, 20, 10),
        "B_white_adv_black_adv": (25, 30, 25),
        "C_white_adv_even": (10, 30, 10),
        "D_even_black_adv": (20, 20, 25),
    }
    for b in got.values():
        assert 0 <= b.accuracy <= 1 and (2 * b.correct) == int(2 * b.correct)


def test_each_bucket_pair_carries_its_two_games_and_the_interval_is_clustered_by_them(dc_store):
    torch.manual_seed(0)
    comparator = Comparator(build_model(PRESETS["deepchess"], ENC.shape, 2), ENC)  # untrained: any scores do
    path = split(dc_store, "test")
    pairs = PairBatches(path, LoaderConfig(batch_size=4096, shuffle=False))
    t = pq.read_table(path, columns=["game_id", "target"])
    ids, target = t.column("game_id").to_numpy(), t.column("target").to_numpy()
    cp = np.full(pairs.positions_rows, np.nan)
    cp[pairs.white_won[:60]] = 600  # consecutive rows: a few games' positions, so pairs share games
    cp[pairs.black_won[:60]] = -700
    b = bucket_accuracy(comparator, pairs, cp, max_pairs=1000)["B_white_adv_black_adv"]
    assert b.pairs == len(b.scores) == len(b.left_games) == len(b.right_games) == 60
    assert b.scores.sum() == b.correct and set(b.scores) <= {0.0, 0.5, 1.0}
    assert set(b.left_games) <= set(ids[pairs.white_won[:60]]) and (target[np.isin(ids, b.left_games)] == 1).all()
    assert set(b.right_games) <= set(ids[pairs.black_won[:60]]) and (target[np.isin(ids, b.right_games)] == 0).all()
    assert len(set(b.left_games)) < 60 and len(set(b.right_games)) < 60  # games repeat: not independent pairs
    m = two_way_interval(b.scores, b.left_games, b.right_games, seed=3)
    assert b.interval(seed=3) == (m.low, m.high) and m.clusters == len(set(b.left_games)) + len(set(b.right_games))


def _scored_independently(model, pairs: PairBatches) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each of a split's fixed pairs (pairs(0)) right or not by the model's argmax, in one pass,
    with the game its White-won and its Black-won position come from: not through the code tested."""
    left, right, y = pairs.pairs(0)
    ids = pairs.game_ids()
    with torch.no_grad():
        ok = model(ENC(pairs.batch(left, right))).argmax(1).numpy() == y
    return ok.astype(np.float64), ids[np.where(y == LEFT, left, right)], ids[np.where(y == LEFT, right, left)]


def _clustered_interval_holds(s, seed: int) -> None:
    """The interval: two_way_interval's over the pairs' scores and games, seeded (the same twice),
    around the figure, no narrower than the plain bootstrap's that takes pairs sharing a game
    for independent (here they do share: a game gives about 10 positions)."""
    n = len(s.scores)
    assert n == len(s.white_games) == len(s.black_games) > 100
    assert len(set(s.white_games)) < n and len(set(s.black_games)) < n  # games repeat among the pairs
    low, high = s.interval(seed)
    assert (low, high) == s.interval(seed)
    m = two_way_interval(s.scores, s.white_games, s.black_games, seed=seed)
    assert (low, high) == (m.low, m.high) and m.clusters == len(set(s.white_games)) + len(set(s.black_games))
    plain = mean_interval(s.scores, seed=seed)
    assert low <= s.accuracy <= high and low <= plain.low and high >= plain.high


def test_val_and_test_pair_accuracy_come_with_each_pair_and_its_games_and_an_interval_by_game(dc_store, trained):
    """run_figures scores the run's own val and test pairs again, pair by pair: the mean is the
    figure the run recorded (val: the last epoch's model, as model_metrics' val accuracy; test:
    the best one), pinned by scoring the same pairs independently; the pairs and the figures are
    unchanged. The material baseline's accuracy on the same pairs, and train's, the same way."""
    cfg, result = trained
    f = run_figures(cfg, result.checkpoint)
    got = f["pair_scores"]
    assert set(got) == {
        ("train", "pair_accuracy"),
        ("val", "accuracy"),
        ("test", "accuracy"),
        *((s, "material_baseline_accuracy") for s in ("train", "val", "test")),
    }
    best, ck = load_model(result.checkpoint)
    last = build_model(PRESETS["deepchess"], ENC.shape, 2)
    last.load_state_dict(ck["model"])
    last.eval()
    held = {s: PairBatches(split(dc_store, s), LoaderConfig(batch_size=4096, shuffle=False)) for s in ("val", "test")}
    for (s, model), recorded in (
        (("val", last), result.history[-1]["val_accuracy"]),
        (("test", best), result.test["accuracy"]),
    ):
        scores, white, black = _scored_independently(model, held[s])
        mine = got[(s, "accuracy")]
        assert scores.mean() == mine.accuracy == recorded, s  # the figure is the one recorded before
        assert np.array_equal(mine.scores, scores) and np.array_equal(mine.white_games, white), s
        assert np.array_equal(mine.black_games, black), s
        _clustered_interval_holds(mine, cfg.seed)
        baseline = MaterialBaseline(f["baseline_a"], f["baseline_b"])
        left, right, y = held[s].pairs(0)
        by_material = ((baseline.logits(held[s].batch(left, right)) > 0).long().numpy() == y).astype(np.float64)
        b = got[(s, "material_baseline_accuracy")]
        assert np.array_equal(b.scores, by_material) and b.accuracy == f[f"baseline_{s}_accuracy"], s
        assert b.accuracy == baseline.accuracy(held[s]), s  # as the figure was computed before
        assert np.array_equal(b.white_games, white) and np.array_equal(b.black_games, black), s
        _clustered_interval_holds(b, cfg.seed)
    assert got[("test", "material_baseline_accuracy")].accuracy == result.test["material_baseline_accuracy"]
    train_pairs = PairBatches(split(dc_store, "train"), LoaderConfig(batch_size=cfg.batch_size), seed=cfg.seed)
    assert f["baseline_train_accuracy"] == MaterialBaseline(f["baseline_a"], f["baseline_b"]).accuracy(train_pairs)
    train_held = PairBatches(split(dc_store, "train"), LoaderConfig(batch_size=4096, shuffle=False))
    before = evaluate(best, train_held, ENC, torch.device("cpu"), 2, 1.0, False)["accuracy"]  # how it was computed
    assert got[("train", "pair_accuracy")].accuracy == f["model_train_accuracy"] == before
    assert f["pairs_val"] == len(got[("val", "accuracy")].scores) and f["pairs_test"] == result.test["rows"]
    _clustered_interval_holds(got[("train", "pair_accuracy")], cfg.seed)
    low, high = got[("test", "accuracy")].interval(cfg.seed)
    assert (low, high) != got[("test", "accuracy")].interval(cfg.seed + 1)  # the seed is the interval's


def test_the_model_asset_writes_each_pair_accuracys_interval_to_model_metrics_and_metadata(trained):
    from assets.training import deepchess_extras

    cfg, result = trained
    meta, rows = deepchess_extras("deepchess_net", cfg, result)
    got = {(s, m): v for s, m, v in rows}
    for s, metric, value in (
        ("val", "accuracy", result.history[-1]["val_accuracy"]),
        ("test", "accuracy", result.test["accuracy"]),
        ("test", "material_baseline_accuracy", result.test["material_baseline_accuracy"]),
    ):
        low, high = got[(s, f"{metric}_low95")], got[(s, f"{metric}_high95")]
        assert low <= value <= high and 0 <= low < high <= 1, (s, metric)
        shown = meta["pair_accuracy_intervals"][s][metric]
        assert (shown["low95"], shown["high95"], shown["value"]) == (low, high, value)
        assert shown["n"] == (result.test["rows"] if s == "test" else got[("val", "rows")])
        assert 1 < shown["games"] < 2 * shown["n"]
    assert got[("train", "rows")] > 0 and ("train", "pair_accuracy_low95") in got
    assert "clustered by game" in meta["pair_accuracy_intervals_how"] and "95%" in meta["material_baseline"].value
    json.dumps(meta["pair_accuracy_intervals"])  # plain numbers: Dagster keeps it as JSON


def test_on_the_published_split_pairs_get_the_interval_by_game_too(dc_store, tmp_path):
    """Split position by position, a game has positions in train and in test; inside the test
    file its positions still make many pairs, so the clustering by game still applies."""
    out = Store(tmp_path / "published").ensure()
    spec = SplitConfig(val_fraction=0.15, test_fraction=0.15, by="position", guard=False)
    build_dataset(dc_store, "deepchess", {}, spec, out=out)
    games = {s: set(pq.read_table(split(out, s), columns=["game_id"]).column(0).to_pylist()) for s in SPLITS}
    assert games["train"] & games["test"]  # the published protocol: games on both sides of the split
    torch.manual_seed(0)
    model = build_model(PRESETS["deepchess"], ENC.shape, 2).eval()  # untrained: any scores do
    pairs = PairBatches(split(out, "test"), LoaderConfig(batch_size=4096, shuffle=False))
    s = pair_scores(model, pairs, ENC)
    scores, white, black = _scored_independently(model, pairs)
    assert np.array_equal(s.scores, scores) and np.array_equal(s.white_games, white)
    assert np.array_equal(s.black_games, black) and s.accuracy == scores.mean()
    _clustered_interval_holds(s, 0)


def test_solution_ranking_counts_positions_ranked_in_the_suites_order(shared_data):
    from pipeline.play.suites import read_epd

    positions = read_epd(shared_data / "epd" / "STS1-STS15_LAN_v3.epd").positions[:12]

    class Oracle:
        """Prefers the position after the move with more points (for the side that moved)."""

        def __init__(self, p, order):
            self.p, self.order = p, order

        def embed(self, boards):
            return boards

        def white_better(self, boards):
            s = torch.tensor([self.order(b) for b in boards], dtype=torch.float64)
            if not self.p.board.turn:
                s = -s
            return (s[:, None] > s[None, :]).double() + 0.5 * (s[:, None] == s[None, :]).double()

    several = [p for p in positions if len(p.points) >= 2]
    ok = sum(
        solution_ranking(Oracle(p, lambda b, p=p: p.points[b.peek()] if b.move_stack else 0), [p])[0] for p in several
    )
    assert ok == len(several)  # an oracle ranks every one in order
    bad = sum(solution_ranking(Oracle(p, lambda b, p=p: -p.points[b.peek()]), [p])[0] for p in several)
    assert bad == 0
    assert solution_ranking(Oracle(positions[0], lambda b: 0), [p for p in positions if len(p.points) < 2]) == (0, 0)


def test_curves_show_each_pretrained_layer_and_the_baseline_beside_chance():
    from pipeline.plots import pretrain_curves_figure

    pre = [{"layer": k, "epoch": e, "train_loss": 0.5 - 0.1 * e} for k in range(4) for e in range(2)]
    hist = [{"epoch": e, "train_loss": 0.69, "val_loss": 0.69, "val_accuracy": 0.5} for e in range(3)]
    fig = pretrain_curves_figure(pre, hist, 0.7, "deepchess")
    left, right, acc = fig.axes
    assert [line.get_label() for line in left.get_lines()] == [f"layer {k}" for k in range(4)]
    levels = {line.get_label(): line.get_ydata()[0] for line in acc.get_lines()}
    assert levels["chance"] == 0.5 and levels["material baseline (val)"] == 0.7  # a stuck run sits on these
