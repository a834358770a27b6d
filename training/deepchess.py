"""DeepChess (David, Netanyahu and Wolf 2016; Low 2021): a siamese comparator of two positions.

Pos2Vec is a stacked autoencoder 773-600-400-200-100 (training.autoencoder, sigmoid units as
in the deep belief network it was, pretrained layer by layer with binary cross-entropy, Adam
5e-3 times 0.98 each epoch). Two Pos2Vec towers with shared weights feed 400-200-100-2: class 0
"the left position is the one from a game White won", class 1 "the right one is". The whole
network is then fine-tuned end to end on pairs (one position from a game White won, one from a
game Black won) drawn afresh, and put in a random order, every epoch.

The network (DeepChess) is in training.models, beside the other architectures; this module
holds its pairs, its baseline and the players. The training loop is training.train's: the
`deepchess` preset (kind "siamese") makes it read its splits through `PairBatches` (pairs drawn
inside one split file only, so no game is on both sides of the split), calls
`DeepChess.pretrain` before the first epoch, and decays the learning rate per epoch. A pair
batch is an ordinary `Batch` of 2B positions (the B left ones, then the B right ones) and B
targets, so the encoders and the loop need nothing new: the model splits its input in halves.

Playing with a comparator (`ComparisonEvaluator`): the 1-ply player ranks the positions its
legal moves lead to by a round-robin tournament: every pair of them is compared in both
orders, and a position's score is its summed probability of being the better one for the
side that moved. Scores only order positions of one batch, so it is a 1-ply player
(max_depth = 1), not an evaluator to search with.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import nn

from pipeline.research.intervals import two_way_interval
from pipeline.store.storage_paths import StorePath
from training.checkpoints import evaluate, load_model, resolve_device, store_location
from training.choices import PairOrder, check_choice
from training.data import LoaderConfig, ParquetBatches
from training.encoders import Batch, material_balance, unpack
from training.models import DeepChess

LEFT, RIGHT = 0, 1
"""Comparator classes: the left position is the White-won one / the right one is."""
EVEN_CP = 5
"""Experiment 1's "even": |static eval| <= 0.05 pawns."""
ADVANTAGE_CP = 500
"""Experiment 1's "advantage": |static eval| >= 5 pawns."""
BUCKETS = {
    "A_even_even": ("even", "even"),
    "B_white_adv_black_adv": ("white_adv", "black_adv"),
    "C_white_adv_even": ("white_adv", "even"),
    "D_even_black_adv": ("even", "black_adv"),
}
"""Experiment 1's pair buckets: (class of the position from the White-won game (left), class
of the one from the Black-won game (right))."""


class PairBatches:
    """Pairs of one split file: a position from a game White won and one from a game Black won.

    Same constructor as training.data.ParquetBatches (path, loader config, seed, row limit);
    `rows` is the number of pairs an epoch gives (the smaller of the two sides). With
    `config.shuffle` every epoch draws new pairs and a new order from (seed, epoch); without it
    (val, test) every epoch gives the same pairs. Each batch holds 2 x batch_size positions."""

    def __init__(
        self,
        path: Path,
        config: LoaderConfig | None = None,
        seed: int = 0,
        limit: int = 0,
        target: str = "target",
        order: PairOrder = "winner",
    ):
        if target != "target":
            raise ValueError(f"pairs are drawn by the winner (column target), not by {target!r}")
        check_choice("pair order", order, get_args(PairOrder))
        self.path = Path(path)
        self.config = config = config or LoaderConfig()
        self.seed = seed
        self.order = order
        # The split's positions, read once (about 110 bytes a row).
        whole = ParquetBatches(self.path, LoaderConfig(batch_size=65_536, shuffle=False), limit=limit)
        parts = list(whole.epoch(0))
        self.positions_rows = whole.rows
        if parts:
            self.planes = torch.cat([p.planes for p in parts])
            self.white_to_move = torch.cat([p.white_to_move for p in parts])
            self.castling = torch.cat([p.castling for p in parts])
            self.mirrored = torch.cat([p.mirrored for p in parts])
            target = torch.cat([p.target for p in parts]).numpy()
        else:
            self.planes = torch.zeros((0, 96), dtype=torch.uint8)
            self.white_to_move = torch.zeros(0, dtype=torch.bool)
            self.castling = torch.zeros(0, dtype=torch.uint8)
            self.mirrored = torch.zeros(0, dtype=torch.bool)
            target = np.zeros(0, dtype=np.float32)
        self.white_won = np.flatnonzero(target == 1)
        self.black_won = np.flatnonzero(target == 0)
        self.rows = self.winner_rows = int(min(len(self.white_won), len(self.black_won)))
        if order == "score":  # any two scored positions an epoch, each position in one pair
            self.score = self._scores()
            self.scored = np.flatnonzero(~np.isnan(self.score))
            self.rows = len(self.scored) // 2
            if self.positions_rows and not len(self.scored):
                raise ValueError(
                    f"{self.path} has no position with a score: label the store (chess-pipeline label, e.g. "
                    "--static) and build the set again with the same label flags"
                )
        # Single positions in a random order, for Pos2Vec's pretraining.
        self.positions = ParquetBatches(self.path, config, seed=seed, limit=limit)

    def game_ids(self) -> np.ndarray:
        """game_id of each position held (row order of the file)."""
        t = pq.read_table(self.path, columns=["game_id"])
        return t.column("game_id").to_numpy()[: self.positions_rows]

    def by_winner(self) -> PairBatches:
        """The same positions (nothing read again), their pairs by the winner: what the material
        baseline is fitted on, whatever order a model's train pairs are in."""
        if self.order == "winner":
            return self
        other = copy.copy(self)
        other.order, other.rows = "winner", self.winner_rows
        return other

    def _scores(self) -> np.ndarray:
        """Each position's score (White's view; NaN where it has none), as float64."""
        if "score" not in pq.read_schema(self.path).names:
            raise ValueError(
                f"{self.path} has no score column: pairs ordered by score need a set that has one "
                "(deepchess_scored: chess-pipeline datasets deepchess_scored)"
            )
        score = pq.read_table(self.path, columns=["score"]).column("score")
        return score.cast(pa.float64()).fill_null(math.nan).to_numpy()[: self.positions_rows]

    def pairs(self, epoch: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(left rows, right rows, target) of an epoch: target LEFT where the left position is
        from the White-won game, or (order score) where the left one has the higher score (a tie
        goes either way by the draw's coin)."""
        if self.order == "score":
            rng = np.random.default_rng([self.seed, epoch if self.config.shuffle else 0, 11])
            drawn = rng.permutation(self.scored)
            left, right = drawn[: self.rows], drawn[self.rows : 2 * self.rows]
            coin = rng.random(self.rows) < 0.5
            sl, sr = self.score[left], self.score[right]
            return left, right, np.where(sl == sr, coin, sr > sl).astype(np.int64)  # RIGHT: right scores more
        rng = np.random.default_rng([self.seed, epoch if self.config.shuffle else 0, 7])
        w = rng.permutation(self.white_won)[: self.rows]
        b = rng.permutation(self.black_won)[: self.rows]
        swap = rng.random(self.rows) < 0.5
        left = np.where(swap, b, w)
        right = np.where(swap, w, b)
        return left, right, swap.astype(np.int64)  # swapped: the White-won one is on the right

    def __len__(self) -> int:
        b = self.config.batch_size
        return self.rows // b if self.config.drop_last else -(-self.rows // b)

    def take(self, rows: np.ndarray, target: np.ndarray | None = None) -> Batch:
        """The positions of the given rows as a batch."""
        idx = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        return Batch(
            self.planes[idx],
            self.white_to_move[idx],
            self.castling[idx],
            self.mirrored[idx],
            None if target is None else torch.from_numpy(target.astype(np.float32)),
        )

    def batch(self, left: np.ndarray, right: np.ndarray, target: np.ndarray | None = None) -> Batch:
        """A pair batch: the left positions, then the right ones."""
        return self.take(np.concatenate([left, right]), target)

    def epoch(self, n: int = 0) -> Iterator[Batch]:
        left, right, target = self.pairs(n)
        b = self.config.batch_size
        end = self.rows - self.rows % b if self.config.drop_last else self.rows
        for i in range(0, end, b):
            yield self.batch(left[i : i + b], right[i : i + b], target[i : i + b])


# Each pair of a split scored, for the pair accuracy's interval. -------------------------------


def pair_interval(
    scores: np.ndarray, white_games: np.ndarray, black_games: np.ndarray, seed: int = 0
) -> tuple[float, float]:
    """(low, high): the 95% interval of the mean of pairs' scores, a bootstrap clustered by game on
    both sides of the pairs (pipeline.research.intervals.two_way_interval): a game gives many
    positions, so many pairs share a game and are not independent; (0, 1) without pairs."""
    if not len(scores):
        return 0.0, 1.0
    m = two_way_interval(scores, white_games, black_games, seed=seed)
    return m.low, m.high


@dataclass(frozen=True)
class PairScores:
    """Each pair of a split's fixed pairs (PairBatches.pairs(0), the loader's order) scored: 1
    judged right, 0 not; with the game of its White-won and of its Black-won position."""

    scores: np.ndarray
    white_games: np.ndarray
    black_games: np.ndarray

    @property
    def accuracy(self) -> float:
        return float(self.scores.mean()) if len(self.scores) else math.nan

    @classmethod
    def from_rows(cls, per_row: dict, pairs: PairBatches) -> PairScores:
        """The pairs of `pairs.epoch(0)` an evaluation pass scored (training.checkpoints.evaluate's
        `per_row`), each right (1) or not (0), with its two games."""
        scores = (per_row["prediction"] == per_row["target"]).astype(np.float64)
        return cls(scores, *pair_games(pairs, len(scores)))

    @property
    def games(self) -> int:
        """The games the pairs come from (the interval's clusters)."""
        return len(set(self.white_games)) + len(set(self.black_games))

    def interval(self, seed: int = 0) -> tuple[float, float]:
        """The accuracy's 95% interval, clustered by game on both sides (pair_interval)."""
        return pair_interval(self.scores, self.white_games, self.black_games, seed)


def pair_games(pairs: PairBatches, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The game_id of the White-won and of the Black-won position of the first n pairs of
    `pairs.epoch(0)` (pairs(0), in order: what evaluate and MaterialBaseline score)."""
    left, right, target = pairs.pairs(0)
    ids = pairs.game_ids()
    white, black = np.where(target == LEFT, left, right), np.where(target == LEFT, right, left)
    return ids[white[:n]], ids[black[:n]]


def pair_scores(
    model: nn.Module, pairs: PairBatches, encoder, device: torch.device | str = "cpu", amp: bool = False
) -> PairScores:
    """A comparator's pairs of `pairs.epoch(0)` scored one by one, in the very pass that gives
    the run's accuracy (training.checkpoints.evaluate, its `per_row`): the scores' mean is that
    figure, on the same device and precision."""
    per_row: dict = {}
    evaluate(model, pairs, encoder, torch.device(device), 2, 1.0, amp, per_row)
    return PairScores.from_rows(per_row, pairs)


# The plain baseline: a logistic regression on the material difference of the two positions. ---


def material(batch: Batch) -> torch.Tensor:
    """White's material minus Black's (pawns: 1 3 3 5 9, kings 0) of each position."""
    return material_balance(unpack(batch.planes))


@dataclass
class MaterialBaseline:
    """P(RIGHT) = sigmoid(a + b * (material(left) - material(right))), fitted on pairs."""

    a: float = 0.0
    b: float = 0.0

    def logits(self, batch: Batch) -> torch.Tensor:
        m = material(batch)
        half = m.shape[0] // 2
        return self.a + self.b * (m[:half] - m[half:])

    @classmethod
    def fit(cls, pairs: PairBatches, epoch: int = 0, steps: int = 200) -> MaterialBaseline:
        x, y = [], []
        for batch in pairs.epoch(epoch):
            m = material(batch)
            half = m.shape[0] // 2
            x.append(m[:half] - m[half:])
            y.append(batch.target)
        if not x:
            return cls()
        x, y = torch.cat(x).double(), torch.cat(y).double()
        w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w], max_iter=steps, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(w[0] + w[1] * x, y)
            loss.backward()
            return loss

        opt.step(closure)
        return cls(float(w[0].detach()), float(w[1].detach()))

    def accuracy(self, pairs: PairBatches, epoch: int = 0) -> float:
        right, n = 0, 0
        for batch in pairs.epoch(epoch):
            pred = (self.logits(batch) > 0).long()
            right += (pred == batch.target.long()).sum().item()
            n += len(batch.target)
        return right / n if n else math.nan

    def pair_scores(self, pairs: PairBatches) -> PairScores:
        """Each pair of `pairs.epoch(0)` right (1) or not (0) by the rule, with its two games: the
        scores' mean is `accuracy(pairs)`."""
        right = [((self.logits(b) > 0).long() == b.target.long()).numpy() for b in pairs.epoch(0)]
        scores = np.concatenate(right).astype(np.float64) if right else np.zeros(0)
        return PairScores(scores, *pair_games(pairs, len(scores)))


# Comparing positions with a trained model. ----------------------------------------------------


def load_comparator(checkpoint: StorePath | str, device: str = "cpu") -> tuple[DeepChess, dict]:
    """A DeepChess checkpoint's best model (a file, or an object of an S3 store) and the checkpoint."""
    model, ck = load_model(store_location(checkpoint), device)
    if not isinstance(model, DeepChess):
        raise ValueError(f"{checkpoint}: not a DeepChess comparator (model {ck['config']['model']})")
    return model, ck


class Comparator:
    """A trained DeepChess model over python-chess boards (White's point of view)."""

    def __init__(self, model: DeepChess, encoder, device: torch.device | str = "cpu"):
        self.model = model.to(device).eval()
        self.encoder = encoder
        self.device = torch.device(device)

    @torch.no_grad()
    def embed(self, boards: Sequence[chess.Board]) -> torch.Tensor:
        from pipeline.play.search import board_arrays

        planes, white, castling = board_arrays(boards)
        w = torch.from_numpy(white)
        batch = Batch(torch.from_numpy(planes), w, torch.from_numpy(castling), torch.zeros_like(w)).to(self.device)
        return self.model.embed(self.encoder(batch))

    @torch.no_grad()
    def white_better(self, codes: torch.Tensor) -> torch.Tensor:
        """P[i, j]: probability that position i is the White-won one against j, both orders
        averaged (so P + P.T = 1), from Pos2Vec codes (N, 100)."""
        n = codes.shape[0]
        i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        logits = self.model.compare(codes[i.flatten()], codes[j.flatten()]).float()
        p_left = torch.softmax(logits, dim=1)[:, LEFT].reshape(n, n)
        return (p_left + (1 - p_left.T)) / 2

    @torch.no_grad()
    def left_probability(self, left: Batch, right: Batch) -> torch.Tensor:
        """P(the left position is the White-won one) for aligned batches of positions."""
        codes = self.model.embed(self.encoder(left.to(self.device)))
        other = self.model.embed(self.encoder(right.to(self.device)))
        return torch.softmax(self.model.compare(codes, other).float(), dim=1)[:, LEFT]


class ComparisonEvaluator:
    """The 1-ply comparison player as an evaluator for pipeline.play.search.AlphaBeta(depth=1): the
    positions of one batch (a node's children) play a round robin, each pair compared in both
    orders; a position's score is 1000 x (2 x its mean probability of being the better one for
    White - 1), negated where Black is to move (the side to move's view the search wants).
    Scores order only the positions of one call: use it at depth 1 (max_depth)."""

    max_depth = 1

    def __init__(self, checkpoint: Path | str, name: str = "", device: str = "cpu", threads: int = 1):
        from training.encoders import get_encoder

        if threads:
            torch.set_num_threads(threads)
        dev = resolve_device(device)
        model, ck = load_comparator(checkpoint, str(dev))
        self.ck = ck
        self.comparator = Comparator(model, get_encoder(ck["encoder"]["name"]), dev)
        self.name = name or "deepchess"

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        if not boards:
            return np.zeros(0)
        if len(boards) == 1:
            return np.zeros(1)
        p = self.comparator.white_better(self.comparator.embed(boards))
        n = len(boards)
        mean = (p.sum(1) - p.diagonal()) / (n - 1)  # against every other position
        score = (2 * mean - 1).cpu().numpy().astype(np.float64) * 1000
        white = np.fromiter((b.turn for b in boards), dtype=bool, count=n)
        return np.where(white, score, -score)


def solution_ranking(comparator: Comparator, positions) -> tuple[int, int]:
    """STS "solution ranking": of the positions with at least two scored moves, how many the
    comparator ranks in the suite's order, i.e. for every two scored moves with different
    points it prefers (probability > 1/2, both orders averaged) the position after the move
    with more points, for the side making the move. Returns (ranked in order, positions)."""
    ok, n = 0, 0
    for p in positions:
        pts = p.points
        if len(pts) < 2:
            continue
        moves = list(pts)
        boards = []
        for m in moves:
            b = p.board.copy(stack=False)
            b.push(m)
            boards.append(b)
        better = comparator.white_better(comparator.embed(boards)).cpu().numpy()
        if p.board.turn == chess.BLACK:
            better = 1 - better
        n += 1
        ok += all(
            better[i, j] > 0.5 for i in range(len(moves)) for j in range(len(moves)) if pts[moves[i]] > pts[moves[j]]
        )
    return ok, n


def static_class(cp: float | None) -> str | None:
    """'even' (|cp| <= 5), 'white_adv' (>= +500), 'black_adv' (<= -500), else None."""
    if cp is None or (isinstance(cp, float) and math.isnan(cp)):
        return None
    if abs(cp) <= EVEN_CP:
        return "even"
    if cp >= ADVANTAGE_CP:
        return "white_adv"
    if cp <= -ADVANTAGE_CP:
        return "black_adv"
    return None


@dataclass
class BucketResult:
    bucket: str
    pairs: int
    correct: float
    """Pairs judged right, counting each pair's two presentations (left/right and swapped) half."""
    left_positions: int
    right_positions: int
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Each pair's score: 1 right both ways, 0.5 one way, 0 neither (their sum is `correct`)."""
    left_games: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    """The game_id of each pair's left position (a game White won)."""
    right_games: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    """The game_id of each pair's right position (a game Black won)."""

    @property
    def accuracy(self) -> float:
        return self.correct / self.pairs if self.pairs else math.nan

    def interval(self, seed: int = 0) -> tuple[float, float]:
        """The accuracy's 95% interval, a bootstrap clustered by game on both sides of the pairs
        (pipeline.research.intervals.two_way_interval): the positions of a bucket come from few
        games (a game won on the board stays at +5 pawns for many moves), so its pairs share
        games and are not independent; (0, 1) without pairs."""
        return pair_interval(self.scores, self.left_games, self.right_games, seed)


def bucket_accuracy(
    comparator: Comparator,
    pairs: PairBatches,
    static_cp: np.ndarray,
    max_pairs: int = 100_000,
    seed: int = 0,
    batch_size: int = 4096,
) -> dict[str, BucketResult]:
    """Experiment 1: for each bucket (BUCKETS), pairs of a position from a White-won game
    (left) and one from a Black-won game (right) of the given static classes, drawn at random
    (each position at most once per bucket, at most max_pairs pairs); the accuracy counts each
    pair shown both ways (left first, then swapped), half a pair each; each pair's score and its
    two games are kept for the interval (BucketResult.interval). static_cp: White's static
    evaluation of every row of `pairs` (NaN: none)."""
    classes = np.array([static_class(None if np.isnan(c) else float(c)) for c in static_cp], dtype=object)
    games = pairs.game_ids()
    rng = np.random.default_rng([seed, 16])
    out = {}
    for name, (left_class, right_class) in BUCKETS.items():
        lw = pairs.white_won[classes[pairs.white_won] == left_class]
        rb = pairs.black_won[classes[pairs.black_won] == right_class]
        k = int(min(len(lw), len(rb), max_pairs))
        left = rng.permutation(lw)[:k]
        right = rng.permutation(rb)[:k]
        scores = np.zeros(k)
        for i in range(0, k, batch_size):
            la, rb_ = pairs.take(left[i : i + batch_size]), pairs.take(right[i : i + batch_size])
            p_straight = comparator.left_probability(la, rb_)
            p_swapped = comparator.left_probability(rb_, la)  # right is the White-won one now
            scores[i : i + batch_size] = 0.5 * ((p_straight > 0.5).cpu().numpy() + (p_swapped < 0.5).cpu().numpy())
        out[name] = BucketResult(name, k, float(scores.sum()), len(lw), len(rb), scores, games[left], games[right])
    return out


def run_figures(cfg, checkpoint: Path | str) -> dict:
    """What a finished run is judged by beside its test accuracy, on the run's own pairs: the
    material baseline (fitted on train's first-epoch pairs; accuracy on those, on val and on
    test, the pairs the model was evaluated on) and the model's accuracy on train pairs (the
    first max_eval_rows rows of train, pairs drawn as for val). cfg: the run's TrainConfig.

    `pair_scores`: each of those figures pair by pair (PairScores, for its interval), keyed by
    its model_metrics (split, metric): the model's val accuracy (its last epoch's weights, as
    the run's val figure is) and test accuracy (its best weights) scored again on the run's
    device and precision, the pairs unchanged, so each mean is the figure the run recorded."""
    from pipeline.datasets.datasets import SPLITS, built_with, dataset_dir
    from pipeline.store import storage
    from pipeline.store.store import Store

    folder = dataset_dir(Store(storage.parse_root(cfg.store)), cfg.dataset)
    files = {s: storage.local_file(folder / f"{s}.parquet") for s in ("train", "val", "test")}  # S3: cached copies
    ev = LoaderConfig(batch_size=4096, shuffle=False)
    train_pairs = PairBatches(
        files["train"], LoaderConfig(batch_size=cfg.batch_size), seed=cfg.seed, limit=cfg.max_train_rows
    )
    held = {
        "train": PairBatches(files["train"], ev, limit=cfg.max_eval_rows),
        "val": PairBatches(files["val"], ev, limit=cfg.max_eval_rows),
        "test": PairBatches(files["test"], ev, limit=cfg.max_eval_rows),
    }
    baseline = MaterialBaseline.fit(train_pairs)
    scored = {
        ("train", "material_baseline_accuracy"): baseline.pair_scores(train_pairs),
        ("val", "material_baseline_accuracy"): baseline.pair_scores(held["val"]),
        ("test", "material_baseline_accuracy"): baseline.pair_scores(held["test"]),
    }
    out = {
        "baseline_a": baseline.a,
        "baseline_b": baseline.b,
        # MaterialBaseline.accuracy's right / pairs, from the same pass: the same numbers
        **{f"baseline_{s}_accuracy": scored[(s, "material_baseline_accuracy")].accuracy for s in SPLITS},
        "pairs_train": train_pairs.rows,
        "pairs_val": held["val"].rows,
        "pairs_test": held["test"].rows,
        "pairs_train_held": held["train"].rows,
        "split": built_with(files["test"]).get("split", {}),
    }
    model, ck = load_model(store_location(checkpoint))
    from training.encoders import get_encoder

    encoder = get_encoder(ck["encoder"]["name"])
    scored[("train", "pair_accuracy")] = train = pair_scores(model, held["train"], encoder)  # on the CPU, as before
    out["model_train_accuracy"] = train.accuracy  # evaluate's right / pairs: the same number
    device = resolve_device(cfg.device)
    scored[("test", "accuracy")] = pair_scores(model.to(device), held["test"], encoder, device, cfg.amp)
    if ck.get("history"):  # the val figure: the last epoch's model (the checkpoint's `model`)
        model.load_state_dict(ck["model"])
        scored[("val", "accuracy")] = pair_scores(model.eval(), held["val"], encoder, device, cfg.amp)
    out["pair_scores"] = scored
    return out


def score_order_accuracy(pairs: PairBatches) -> float:
    """The share of a split's pairs by the winner (pairs(0)) that Stockfish's score (the file's
    `score`, White's view) orders right: the White-won position scored higher; a tie, or a position
    without a score, counts half (what a comparator taught by the score could at best learn)."""
    left, right, target = pairs.pairs(0)
    score = pairs._scores()
    sl, sr = score[left], score[right]
    right_better = np.where(np.isnan(sl) | np.isnan(sr) | (sl == sr), 0.5, (sr > sl).astype(float))
    return float(np.where(target == RIGHT, right_better, 1.0 - right_better).mean()) if len(target) else math.nan


def pair_baselines(train_pairs: PairBatches, test_pairs: PairBatches, model: PairScores | None = None) -> dict:
    """The material baseline of a run's test pairs, keyed as training.baselines keys a row
    model's: fitted on train's first-epoch pairs (by the winner), scored on the test pairs the
    model is. With the model's own scores of those pairs (pair_scores), also its lead over the
    baseline and the lead's 95% interval, a paired difference clustered by game on both sides of
    the pairs (`material_lead`, `material_lead_ci95`: half the interval's width)."""
    b = MaterialBaseline.fit(train_pairs)
    base = b.pair_scores(test_pairs)  # its mean is b.accuracy(test_pairs), in the same pass
    out = {
        "material_baseline_accuracy": base.accuracy,
        "material_baseline_intercept": b.a,
        "material_baseline_slope": b.b,
    }
    if "score" in pq.read_schema(test_pairs.path).names:  # the teacher of a comparator taught by score
        out["score_order_accuracy"] = score_order_accuracy(test_pairs)
    if model is not None and len(model.scores):
        lead = two_way_interval(model.scores - base.scores, model.white_games, model.black_games)
        out["material_lead"], out["material_lead_ci95"] = lead.mean, (lead.high - lead.low) / 2
    return out
