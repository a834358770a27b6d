"""Learning by self-play (Hui 2018): TD(lambda) and TD-Leaf(lambda) over the antisymmetric bitboard.

An evaluation V(s) in (-1, 1), White's point of view, learns from the games it plays against
itself with the negamax alpha-beta search of pipeline/search.py (transposition table, the
frontier scored in one batch, as the matches play). After each game the weights move by
temporal differences (Sutton's TD(lambda); Baxter, Tridgell and Weaver's TD-Leaf(lambda)):

    d_t = J_{t+1} - J_t            (J_N = the game's result, +1 / 0 / -1, when the rules ended it;
                                    with clock_ends 'unfinished' not by the fifty- or 75-move rule)
    w  += lr * sum_t grad J_t * sum_{j >= t} lambda^(j - t) d_j

where J_t is V of the position the search started from (TD) or V of the leaf of its principal
variation (TD-Leaf: the position whose value the search actually backed up). A leaf the rules
end (a mate seen by the search) has the result as its value and no gradient.

The representation is the antisymmetric bitboard: 6 x 64 inputs, +1 for a White piece on its
square, -1 for a Black piece on its square with the ranks flipped (each side seen from its own
side of the board). Colour-flipping a position negates the input, so an evaluation without
biases and with odd activations is antisymmetric: V(flip s) = -V(s). Two evaluations:
`linear` (piece-square weights, one tanh unit) and `network` (one tanh hidden layer, no
biases). Both are plain numpy with hand-written gradients: small, fast to call from the
search, and bit-for-bit reproducible.

Self-play runs in generations: the games of a generation are played with the weights the
generation started with (in parallel: one game per process, results in game order), then the
updates are applied game by game in that order, so a seed gives the same games and weights
whatever the number of processes. No Dagster here (assets/selfplay.py calls `play_line`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import math
import os
import random
import re
import time
import typing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Literal

import chess
import chess.pgn
import numpy as np

from pipeline.matches import GameResult, MatchResult, game_end, play_game, wilson_interval
from pipeline.parallel import task_seed, usable_cores, watch_parent
from pipeline.search import AlphaBeta, MaterialEvaluator, RandomPlayer, SearchPlayer, board_arrays
from pipeline.settings import literal_choices
from pipeline.storage_paths import StorePath
from training.choices import check_choice

Learner = Literal["td_leaf", "td_lambda"]
ModelKind = Literal["linear", "network", "residual"]
ClockEnd = Literal["draw", "unfinished"]

FEATURES = 384
"""6 piece types x 64 squares (antisymmetric bitboard)."""
SCORE_SCALE = 1000.0
"""The search sees 1000 x V (side to move's view): centipawn-like, far inside EVAL_CLIP."""
SITE = "chess-pipeline selfplay"
"""The PGN Site of self-play games: ingest files them under source 'selfplay'."""
KRK_FEN = "8/7k/8/5K2/8/8/8/4R3 w - - 0 1"
"""Our KRvK mate-in-3 position (White Kf5, Re1; Black Kh7; White to move: 1. Kf6 Kg8 2. Rh1
Kf8 3. Rh8#). The source's own diagram is not available to us; the tests check that this one
is a mate in exactly 3 that a 3-ply search does not see."""


@dataclass
class TDConfig:
    """Self-play TD learning (Hui 2018): what is learnt, how games are searched, how long."""

    name: str = "td"
    """Name of this self-play line: its games go to `archives/selfplay/<name>/gen-NNNN.pgn` and
    its weights to `selfplay/<name>/gen-NNNN.pt`; a run continues the line from the checkpoint
    of its last materialisation when the settings match."""
    learner: Learner = "td_leaf"
    """td_leaf (the leaves of the principal variations) or td_lambda (the positions played)."""
    model: ModelKind = "linear"
    """linear (piece-square weights over the antisymmetric bitboard, one tanh unit), network
    (one tanh hidden layer, no biases) or residual (the linear model plus a tanh hidden layer:
    it starts as the linear model, the layer's output weights at 0, and the layer learns what
    piece-square weights cannot, such as where one king stands relative to the other)."""
    hidden: int = 32
    """Hidden units of the network and residual models."""
    init: Literal["material", "random", "zero"] = "material"
    """First weights of the linear model (and of the residual model's linear part): material (P 1,
    N 3, B 3, R 5, Q 9 pawns x 0.1 on every square, as KnightCap started TD-Leaf from material),
    random (normal, sd 0.01, seeded) or zero (every move ties: nothing to learn from until a game
    ends decisively). The network always starts random."""
    lam: float = 0.7
    """lambda, the decay of later temporal differences (published: 0.7)."""
    lr: float = 0.01
    """Learning rate of the per-game update (published: 0.01)."""
    depth: int = 2
    """Plies of the alpha-beta search that plays and picks the TD-Leaf leaves."""
    generations: int = 1
    """Generations to play in this run (each: its games, an archive, a checkpoint); the command
    line's 0 plays none and only evaluates (--evaluate)."""
    games: int = 20
    """Self-play games per generation."""
    random_plies: int = 4
    """The first plies of every self-play game are random legal moves, so games differ."""
    max_plies: int = 160
    """A self-play game still going after this many plies ends unfinished (no result to learn)."""
    clock_ends: ClockEnd = "draw"
    """What TD learns from a self-play game the fifty-move (claimed) or seventy-five-move rule
    ends: draw (its result, 0, is the last target) or unfinished (no result: the last position's
    value stands, as for a game stopped at the cap). The move counter is not in the input, so for
    the evaluation these ends are a time limit, not a value of the position (Pardo et al. 2018,
    "Time limits in reinforcement learning": bootstrap at a time-out). The KRvK check uses
    unfinished: there most games end by the fifty-move rule, and as draws they pull the values of
    a won ending towards 0 (README, Self-play)."""
    start: Literal["standard", "krk"] = "standard"
    """standard: the initial position; krk: random king-and-rook-against-king positions."""
    curve_games: int = 20
    """Games against the random mover after each generation (win ratio within 80 plies, the
    learning curve); 0 skips."""
    curve_plies: int = 80
    """A game against the random mover counts as won only inside this many plies (Hui's test)."""
    seed: int = 0
    """Seed of the random plies, the start positions, the network's first weights and the
    random mover: the same seed gives the same games and weights."""
    workers: int = 0
    """Processes playing games at once (0: one per core; 1: in this process)."""

    def __post_init__(self):
        hints = typing.get_type_hints(TDConfig)
        for f in dataclasses.fields(self):  # the choices are the Literal annotations' values
            if (valid := literal_choices(hints[f.name])) is not None:
                check_choice(f.name, getattr(self, f.name), valid)
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise ValueError(f"name {self.name!r}: use letters, digits, '-' and '_' (it names folders)")
        if self.depth < 1:
            raise ValueError(f"depth must be at least 1, got {self.depth}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam (lambda) must be in [0, 1], got {self.lam}")
        if self.generations < 0:
            raise ValueError(f"generations must be 0 or more, got {self.generations}")
        for name in ("games", "max_plies"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


# Representation --------------------------------------------------------------------------


def antisymmetric_features(boards: Sequence[chess.Board]) -> np.ndarray:
    """(N, 384) float32: per piece type P N B R Q K and square, +1 for a White piece, -1 for a
    Black piece on the rank-flipped square (a Black pawn on e7 counts at e2)."""
    planes, _, _ = board_arrays(boards)
    bits = np.unpackbits(planes, axis=1, bitorder="little").reshape(-1, 12, 8, 8).astype(np.float32)
    x = bits[:, :6] - bits[:, 6:, ::-1, :]
    return x.reshape(-1, FEATURES)


# Models ---------------------------------------------------------------------------------------


class LinearValue:
    """V(x) = tanh(w . x): piece-square weights, one unit, no bias (antisymmetric)."""

    kind = "linear"

    def __init__(self, params: np.ndarray | None = None):
        self.params = np.zeros(FEATURES, dtype=np.float64) if params is None else np.asarray(params, np.float64)

    def value(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x @ self.params)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """(N, params): dV/dw of each row."""
        v = self.value(x)
        return (1.0 - v * v)[:, None] * x


class NetworkValue:
    """V(x) = tanh(w2 . tanh(W1 x)): one hidden tanh layer, no biases (antisymmetric)."""

    kind = "network"

    def __init__(self, params: np.ndarray | None = None, hidden: int = 32, seed: int = 0):
        self.hidden = hidden
        if params is None:
            rng = np.random.default_rng(seed)
            w1 = rng.normal(0.0, 1.0 / math.sqrt(FEATURES), size=(hidden, FEATURES))
            w2 = rng.normal(0.0, 1.0 / math.sqrt(hidden), size=hidden)
            params = np.concatenate([w1.ravel(), w2])
        self.params = np.asarray(params, np.float64)
        if self.params.shape != (hidden * FEATURES + hidden,):
            raise ValueError(f"a network with {hidden} hidden units has {hidden * (FEATURES + 1)} weights")

    def _split(self):
        h = self.hidden
        return self.params[: h * FEATURES].reshape(h, FEATURES), self.params[h * FEATURES :]

    def value(self, x: np.ndarray) -> np.ndarray:
        w1, w2 = self._split()
        return np.tanh(np.tanh(x @ w1.T) @ w2)

    def grad(self, x: np.ndarray) -> np.ndarray:
        w1, w2 = self._split()
        h = np.tanh(x @ w1.T)  # (N, H)
        v = np.tanh(h @ w2)
        dv = 1.0 - v * v  # (N,)
        g_w2 = dv[:, None] * h
        g_w1 = (dv[:, None] * w2[None, :] * (1.0 - h * h))[:, :, None] * x[:, None, :]  # (N, H, 384)
        return np.concatenate([g_w1.reshape(len(x), -1), g_w2], axis=1)


class ResidualValue:
    """V(x) = tanh(w . x + w2 . tanh(W1 x)): the linear model plus one hidden tanh layer, no
    biases (antisymmetric). Parameters: w (384), W1 (hidden x 384), w2 (hidden)."""

    kind = "residual"

    def __init__(self, linear: np.ndarray, params: np.ndarray | None = None, hidden: int = 32, seed: int = 0):
        self.hidden = hidden
        if params is None:
            rng = np.random.default_rng(seed)
            w1 = rng.normal(0.0, 1.0 / math.sqrt(FEATURES), size=(hidden, FEATURES))
            params = np.concatenate([np.asarray(linear, np.float64), w1.ravel(), np.zeros(hidden)])
        self.params = np.asarray(params, np.float64)
        if self.params.shape != (FEATURES + hidden * FEATURES + hidden,):
            raise ValueError(
                f"a residual model with {hidden} hidden units has {(hidden + 1) * FEATURES + hidden} weights"
            )

    def _split(self):
        h, n = self.hidden, FEATURES
        return self.params[:n], self.params[n : n + h * n].reshape(h, n), self.params[n + h * n :]

    def value(self, x: np.ndarray) -> np.ndarray:
        w, w1, w2 = self._split()
        return np.tanh(x @ w + np.tanh(x @ w1.T) @ w2)

    def grad(self, x: np.ndarray) -> np.ndarray:
        w, w1, w2 = self._split()
        h = np.tanh(x @ w1.T)  # (N, H)
        v = np.tanh(x @ w + h @ w2)
        dv = (1.0 - v * v)[:, None]
        g_w1 = (dv * w2[None, :] * (1.0 - h * h))[:, :, None] * x[:, None, :]  # (N, H, 384)
        return np.concatenate([dv * x, g_w1.reshape(len(x), -1), dv * h], axis=1)


MATERIAL_PAWNS = (1.0, 3.0, 3.0, 5.0, 9.0, 0.0)
"""P N B R Q K in pawns: the linear model's `material` start (x 0.1 per pawn)."""


def linear_init(cfg: TDConfig) -> np.ndarray:
    """The linear model's first weights (TDConfig.init)."""
    if cfg.init == "material":
        return np.repeat(np.array(MATERIAL_PAWNS) * 0.1, 64)
    if cfg.init == "random":
        return np.random.default_rng(cfg.seed).normal(0.0, 0.01, FEATURES)
    return np.zeros(FEATURES)


def make_model(cfg: TDConfig, params: np.ndarray | None = None):
    if cfg.model == "linear":
        return LinearValue(linear_init(cfg) if params is None else params)
    if cfg.model == "residual":
        return ResidualValue(linear_init(cfg) if params is None else None, params, cfg.hidden, cfg.seed)
    return NetworkValue(params, cfg.hidden, cfg.seed)


class TDEvaluator:
    """A model as the search's evaluator: SCORE_SCALE x V, from the side to move's view."""

    def __init__(self, model, name: str = ""):
        self.model = model
        self.name = name or f"td_{model.kind}"

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        v = self.model.value(antisymmetric_features(boards)) * SCORE_SCALE
        white = np.fromiter((b.turn for b in boards), dtype=bool, count=len(boards))
        return np.where(white, v, -v)


CLOCK_TERMINATIONS = frozenset({"fifty-move rule (claimed)", "seventy-five-move rule"})
"""The terminations (pipeline.matches.game_end, _selfplay_end) that a move counter decides."""


# The TD update ----------------------------------------------------------------------------


def td_coefficients(values: np.ndarray, final: float | None, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """The temporal differences d_t = J_{t+1} - J_t (the last one against the result when there
    is one) and each position's weight sum_{j >= t} lambda^(j-t) d_j (as many as differences:
    without a result the last position gets no update)."""
    values = np.asarray(values, dtype=np.float64)
    d = np.diff(values)
    if final is not None:
        d = np.append(d, final - values[-1])
    c = np.zeros_like(d)
    acc = 0.0
    for t in range(len(d) - 1, -1, -1):
        acc = d[t] + lam * acc
        c[t] = acc
    return d, c


@dataclass
class GameRecord:
    """One self-play game: its PGN and what the update needs, for each searched position."""

    pgn: str
    result: str
    plies: int
    nodes: int
    seconds: float
    roots: np.ndarray  # (n, 384) int8: the positions the search started from (TD(lambda))
    leaves: np.ndarray  # (n, 384) int8: the leaves of their principal variations (TD-Leaf)
    leaf_over: np.ndarray  # (n,) float: NaN, or the result (White's view) of a leaf the rules end
    termination: str = ""  # how the game ended (the PGN's Termination)


def outcome_value(result: str) -> float | None:
    return {"1-0": 1.0, "0-1": -1.0, "1/2-1/2": 0.0}.get(result)


def td_final(record: GameRecord, clock_ends: ClockEnd = "draw") -> float | None:
    """The game's last TD target: its result, or None (unfinished: the cap, or with clock_ends
    'unfinished' the fifty-move or seventy-five-move rule)."""
    if clock_ends == "unfinished" and record.termination in CLOCK_TERMINATIONS:
        return None
    return outcome_value(record.result)


def td_update(
    model, record: GameRecord, learner: Learner, lam: float, lr: float, clock_ends: ClockEnd = "draw"
) -> tuple[np.ndarray, np.ndarray]:
    """The weight change of one game (not applied) and its temporal differences."""
    x = (record.leaves if learner == "td_leaf" else record.roots).astype(np.float64)
    if len(x) == 0:
        return np.zeros_like(model.params), np.zeros(0)
    values = model.value(x)
    grads = model.grad(x)
    if learner == "td_leaf":
        over = ~np.isnan(record.leaf_over)
        values = np.where(over, record.leaf_over, values)
        grads[over] = 0.0
    d, c = td_coefficients(values, td_final(record, clock_ends), lam)
    return lr * (c[:, None] * grads[: len(c)]).sum(axis=0), d


# Self-play ----------------------------------------------------------------------------------


def game_seed(seed: int, generation: int, index: int, what: str = "selfplay") -> int:
    """A seed per game that does not depend on which process plays it."""
    return task_seed(what, seed, generation, index)


def random_krk(rng: random.Random) -> chess.Board:
    """A legal king-and-rook-against-king position, White to move, not over."""
    while True:
        squares = rng.sample(range(64), 3)
        board = chess.Board(None)
        board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
        board.set_piece_at(squares[1], chess.Piece(chess.ROOK, chess.WHITE))
        board.set_piece_at(squares[2], chess.Piece(chess.KING, chess.BLACK))
        board.turn = chess.WHITE
        if board.is_valid() and not board.is_game_over():
            return board


def start_position(cfg: TDConfig, rng: random.Random) -> chess.Board:
    return random_krk(rng) if cfg.start == "krk" else chess.Board()


def _leaf(board: chess.Board, pv: list[chess.Move]) -> tuple[chess.Board, float]:
    """The position at the end of a principal variation, and its result (White's view) if the
    rules end it there, else NaN."""
    leaf = board.copy()
    for move in pv:
        leaf.push(move)
    end = game_end(leaf, claim_draws=False)
    value = outcome_value(end[0]) if end else None
    return leaf, (np.nan if value is None else value)


def _selfplay_end(board: chess.Board) -> tuple[str, str] | None:
    """The rules' end of a self-play game. No threefold claim: a game goes on to a fivefold
    repetition or the cap, so shallow play that circles still meets positions it can learn
    from. Fifty moves are claimed (the search scores such a position a draw and has no move)."""
    end = game_end(board, claim_draws=False)
    if end is None and board.halfmove_clock >= 100:
        return "1/2-1/2", "fifty-move rule (claimed)"
    return end


def play_selfplay_game(params: np.ndarray, cfg: TDConfig, generation: int, index: int) -> GameRecord:
    """One self-play game with the weights `params`: random plies, then the search for both sides."""
    t0 = time.monotonic()
    rng = random.Random(game_seed(cfg.seed, generation, index))
    model = make_model(cfg, params)
    search = AlphaBeta(TDEvaluator(model), depth=cfg.depth)
    board = start_position(cfg, rng)
    roots, leaves, leaf_over, nodes = [], [], [], 0
    end = _selfplay_end(board)
    while end is None and board.ply() < cfg.max_plies:
        if board.ply() < cfg.random_plies:
            board.push(rng.choice(list(board.legal_moves)))
        else:
            res = search.search(board)
            nodes += res.nodes
            leaf, over = _leaf(board, res.pv or [res.move])
            roots.append(board)
            leaves.append(leaf)
            leaf_over.append(over)
            board = board.copy()
            board.push(res.move)
        end = _selfplay_end(board)
    result, termination = end if end else ("*", f"ply limit {cfg.max_plies}")
    game = chess.pgn.Game.from_board(board)  # a start other than the initial position as FEN/SetUp
    name = f"td_{cfg.model} ({cfg.learner}) gen {generation}"
    game.headers.update(
        {
            "Event": "chess-pipeline TD self-play",
            "Site": SITE,
            "Date": dt.date.today().strftime("%Y.%m.%d"),
            "Round": f"{generation}.{index + 1}",
            "White": name,
            "Black": name,
            "Result": result,
            "Termination": termination,
            "PlyCount": str(board.ply()),
        }
    )
    feats = antisymmetric_features(roots + leaves).astype(np.int8) if roots else np.zeros((0, FEATURES), np.int8)
    n = len(roots)
    return GameRecord(
        pgn=str(game),
        result=result,
        plies=board.ply(),
        nodes=nodes,
        seconds=time.monotonic() - t0,
        roots=feats[:n],
        leaves=feats[n:],
        leaf_over=np.array(leaf_over, dtype=np.float64),
        termination=termination,
    )


def td_player(model, depth: int, name: str) -> SearchPlayer:
    return SearchPlayer(AlphaBeta(TDEvaluator(model), depth=depth), name)


def player_name(cfg: TDConfig, generation: int | None = None) -> str:
    gen = f" gen {generation}" if generation is not None else ""
    return f"td_{cfg.model} {cfg.learner}{gen} depth {cfg.depth}"


def vs_random_game(params: np.ndarray, cfg: TDConfig, index: int, stream: str = "curve", name: str = "") -> GameResult:
    """One game of the learned evaluation (cfg.depth) against the random mover from the initial
    position, colours alternating (White in even games), at most cfg.curve_plies plies."""
    ours = td_player(make_model(cfg, params), cfg.depth, name or player_name(cfg))
    rnd = RandomPlayer(game_seed(cfg.seed, 0, index, stream))
    white, black = (ours, rnd) if index % 2 == 0 else (rnd, ours)
    return play_game(white, black, chess.Board(), cfg.curve_plies, event="td vs random", round_=str(index + 1))


def won(game: GameResult, player: str) -> bool:
    return (game.result == "1-0" and game.white == player) or (game.result == "0-1" and game.black == player)


def vs_traditional_game(
    params: np.ndarray, cfg: TDConfig, fen: str, opening: str, white_is_us: bool, max_plies: int, name: str
) -> GameResult:
    """The learned evaluation against the traditional one (material + piece-square tables), both
    searching cfg.depth plies, from an opening."""
    ours = td_player(make_model(cfg, params), cfg.depth, name)
    theirs = SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=cfg.depth))
    white, black = (ours, theirs) if white_is_us else (theirs, ours)
    return play_game(white, black, chess.Board(fen), max_plies, opening=opening, event="td vs traditional")


# Generations -----------------------------------------------------------------------------------


@dataclass
class Generation:
    """What one generation did: its games (PGN), the learning-curve figures, throughput."""

    number: int
    games: int
    results: dict[str, int]
    plies: int
    nodes: int
    seconds: float
    td_error: float
    """Mean squared temporal difference over the generation's positions."""
    win_ratio: float | None = None
    """Against the random mover within curve_plies (None: not measured)."""
    win_interval: tuple[float, float] | None = None
    pgn: str = ""
    params: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def games_per_second(self) -> float:
        return self.games / self.seconds if self.seconds else 0.0

    @property
    def nodes_per_second(self) -> float:
        return self.nodes / self.seconds if self.seconds else 0.0

    def summary(self) -> dict:
        return {
            "generation": self.number,
            "games": self.games,
            "results": dict(self.results),
            "plies": self.plies,
            "nodes": self.nodes,
            "seconds": round(self.seconds, 3),
            "games_per_second": round(self.games_per_second, 4),
            "nodes_per_second": round(self.nodes_per_second, 1),
            "td_error": self.td_error,
            "win_ratio": self.win_ratio,
            "win_interval": list(self.win_interval) if self.win_interval else None,
        }


class GamePool:
    """Games played one per process (or here, with workers=1), results in submission order."""

    def __init__(self, workers: int):
        self.workers = workers or usable_cores()
        self._ex = (
            ProcessPoolExecutor(
                self.workers, mp_context=get_context("spawn"), initializer=watch_parent, initargs=(os.getpid(),)
            )
            if self.workers > 1
            else None
        )

    def map(self, fn: Callable, args: list[tuple]) -> list:
        if self._ex is None:
            return [fn(*a) for a in args]
        futures = [self._ex.submit(fn, *a) for a in args]
        return [f.result() for f in futures]

    def map_progress(self, fn: Callable, args: list[tuple], on_done: Callable[[], None] | None) -> list:
        if self._ex is None:
            out = []
            for a in args:
                out.append(fn(*a))
                if on_done:
                    on_done()
            return out
        futures = [self._ex.submit(fn, *a) for a in args]
        if on_done:
            for f in futures:
                f.add_done_callback(lambda _f: on_done())
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_generation(
    pool: GamePool,
    params: np.ndarray,
    cfg: TDConfig,
    number: int,
    on_game: Callable[[], None] | None = None,
) -> Generation:
    """Play one generation with `params`, then apply each game's update in game order."""
    t0 = time.monotonic()
    records: list[GameRecord] = pool.map_progress(
        play_selfplay_game, [(params, cfg, number, i) for i in range(cfg.games)], on_game
    )
    seconds = time.monotonic() - t0
    model = make_model(cfg, params.copy())
    diffs = []
    for r in records:
        delta, d = td_update(model, r, cfg.learner, cfg.lam, cfg.lr, cfg.clock_ends)
        model.params = model.params + delta
        diffs.append(d)
    all_d = np.concatenate(diffs) if diffs else np.zeros(0)
    results: dict[str, int] = {}
    for r in records:
        results[r.result] = results.get(r.result, 0) + 1
    gen = Generation(
        number=number,
        games=len(records),
        results=results,
        plies=sum(r.plies for r in records),
        nodes=sum(r.nodes for r in records),
        seconds=seconds,
        td_error=float(np.mean(all_d**2)) if len(all_d) else 0.0,
        pgn="\n\n".join(r.pgn for r in records) + "\n\n",
        params=model.params,
    )
    if cfg.curve_games:
        name = player_name(cfg)
        args = [(model.params, cfg, i, "curve", name) for i in range(cfg.curve_games)]
        games = pool.map(vs_random_game, args)
        wins = sum(won(g, name) for g in games)
        gen.win_ratio = wins / len(games)
        gen.win_interval = wilson_interval(wins, len(games))
    return gen


def initial_params(cfg: TDConfig) -> np.ndarray:
    return make_model(cfg).params.copy()


# Checkpoints -----------------------------------------------------------------------------------

CHECKPOINT_VERSION = 1
ENCODER = {"name": "antisymmetric_bitboard", "version": 1}


def save_checkpoint(
    path: StorePath, params: np.ndarray, cfg: TDConfig, generation: int, history: list[dict], archive: str
):
    """The weights after `generation`, with the config, the encoder and the archive of its games
    (atomic: a killed write leaves the previous checkpoint)."""
    import torch

    from pipeline.store_files import atomic_path

    with atomic_path(path) as tmp:  # on S3: a local spool file, uploaded whole
        torch.save(
            {
                "version": CHECKPOINT_VERSION,
                "model": {"kind": cfg.model, "hidden": cfg.hidden, "params": torch.from_numpy(params.copy())},
                "optimizer": {"kind": "td", "learner": cfg.learner, "lam": cfg.lam, "lr": cfg.lr},
                "config": dataclasses.asdict(cfg),
                "encoder": dict(ENCODER),
                "generation": generation,
                "history": history,
                "archive": archive,
            },
            tmp,
        )


def load_checkpoint(path: StorePath | str) -> tuple[np.ndarray, TDConfig, dict]:
    from training import checkpoints

    ck = checkpoints.load_checkpoint(path)
    if ck.get("encoder") != ENCODER:
        raise ValueError(f"{path}: encoder {ck.get('encoder')} is not {ENCODER}")
    return ck["model"]["params"].numpy().astype(np.float64), TDConfig(**ck["config"]), ck


# Published checks ------------------------------------------------------------------------------


def win_ratio_batches(
    params: np.ndarray,
    cfg: TDConfig,
    batches: int = 10,
    games: int = 100,
    pool: GamePool | None = None,
    on_game: Callable[[], None] | None = None,
    name: str = "",
) -> tuple[dict, list[GameResult]]:
    """Hui's test: batches of games against the random mover (cfg.curve_plies, colours
    alternating), each batch's win ratio; their mean with a 95% t interval, and the peak.
    Returns the figures and the games."""
    name = name or player_name(cfg)
    own = pool is None
    pool = pool or GamePool(cfg.workers)
    try:
        played = pool.map_progress(
            vs_random_game, [(params, cfg, i, "batches", name) for i in range(batches * games)], on_game
        )
    finally:
        if own:
            pool.close()
    wins = [won(g, name) for g in played]
    ratios = [sum(wins[b * games : (b + 1) * games]) / games for b in range(batches)]
    mean = float(np.mean(ratios))
    sd = float(np.std(ratios, ddof=1)) if batches > 1 else 0.0
    half = _t95(batches - 1) * sd / math.sqrt(batches) if batches > 1 else 0.0
    figures = {
        "batches": batches,
        "games_per_batch": games,
        "ratios": ratios,
        "mean": mean,
        "interval": [mean - half, mean + half],
        "peak": max(ratios),
        "won": sum(wins),
        "lost": sum(g.result in ("1-0", "0-1") and not w for g, w in zip(played, wins)),
        "drawn": sum(g.result == "1/2-1/2" for g in played),
        "unfinished": sum(g.result == "*" for g in played),
    }
    return figures, played


def vs_traditional(
    params: np.ndarray,
    cfg: TDConfig,
    openings: int = 20,
    max_plies: int = 400,
    pool: GamePool | None = None,
    on_game: Callable[[], None] | None = None,
    name: str = "",
) -> MatchResult:
    """The learned evaluation against the traditional one at equal depth (cfg.depth), from
    Sabatelli's openings, each with both colours (as the evaluation matches play)."""
    from pipeline.openings import sabatelli_openings

    name = name or player_name(cfg)
    ops = sabatelli_openings()[:openings]
    args = [(params, cfg, op.board.fen(), op.id, j == 0, max_plies, name) for op in ops for j in range(2)]
    own = pool is None
    pool = pool or GamePool(cfg.workers)
    try:
        games = pool.map_progress(vs_traditional_game, args, on_game)
    finally:
        if own:
            pool.close()
    out = MatchResult(f"td depth {cfg.depth} vs traditional", name, games[0].black if games else "")
    out.games = games
    return out


def _t95(df: int) -> float:
    """Two-sided 95% Student t quantile (table to 30, then the normal's 1.96)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
    if df in table:
        return table[df]
    return 2.042 if df <= 30 else 1.96


def check_game(model, board: chess.Board, depth: int, max_plies: int, defender_depth: int | None = None) -> GameResult:
    """The game of the mate check: White is the model's search at `depth`, Black a defender
    searching `defender_depth` plies with the traditional evaluation (it sees mates, so it
    delays them as long as its horizon lets it), or the model itself when None; at most
    max_plies plies."""
    white = td_player(model, depth, "td")
    black = (
        SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=defender_depth))
        if defender_depth
        else td_player(model, depth, "td")
    )
    return play_game(white, black, board, max_plies)


def krk_mate_rate(model, depth: int, positions: int, max_plies: int, seed: int, defender: str = "self") -> float:
    """Share of random KRvK positions (seeded) that the model's search mates within max_plies,
    against itself defending (defender 'self') or the random mover ('random')."""
    rng = random.Random(seed)
    boards = [random_krk(rng) for _ in range(positions)]
    mated = 0
    for i, b in enumerate(boards):
        black = td_player(model, depth, "td") if defender == "self" else RandomPlayer(game_seed(seed, 0, i, "krk"))
        g = play_game(td_player(model, depth, "td"), black, b, max_plies)
        mated += g.result == "1-0"
    return mated / positions


def pgn_games(text: str) -> list[chess.pgn.Game]:
    stream, out = io.StringIO(text), []
    while (g := chess.pgn.read_game(stream)) is not None:
        out.append(g)
    return out


# Settings of the published checks -------------------------------------------------------------


@dataclass
class TDEvaluation:
    """The published checks of a self-play line's last checkpoint."""

    line: str = ""
    """The self-play line (TDConfig.name) whose latest checkpoint is checked; empty: the line
    td_selfplay materialised last."""
    batches: int = 10
    """Batches of games against the random mover (published: 10)."""
    batch_games: int = 100
    """Games per batch (published: 100)."""
    eval_depth: int = 0
    """Search depth of the evaluation games (both the random-mover batches and the match against
    the traditional evaluation, which searches as deep); 0: the depth the line was trained at. A
    line trained at depth 1 wins 14 to 21 points more against the random mover at depth 2 (README)."""
    openings: int = 20
    """Sabatelli's openings for the match against the traditional evaluation, each twice (0 skips)."""
    max_plies: int = 400
    """A game against the traditional evaluation still going after this many plies is unfinished."""
    workers: int = 0
    """Processes playing games at once (0: one per core)."""

    def __post_init__(self):
        for name in ("batches", "batch_games"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.eval_depth < 0:
            raise ValueError(f"eval_depth must be 0 (the line's own depth) or more, got {self.eval_depth}")


@dataclass
class KRKCheck:
    """The KRvK check: self-play on random KRvK positions until the search mates from ours."""

    max_generations: int = 20
    """Give up after this many generations."""
    games: int = 40
    """Self-play games per generation."""
    model: ModelKind = "linear"
    """The evaluation learnt (TDConfig.model)."""
    hidden: int = 32
    """Hidden units of the network and residual models."""
    depth: int = 2
    """Search depth of the self-play games. Not 1: a 1-ply search does not see the reply, so
    the attacker leaves its rook en prise and the defender takes it (5 of 8 games, untrained,
    whatever the first weights); those games are draws by insufficient material, and TD learns
    from them that KRvK is worth a draw. At 2 plies the rook stays until the fifty-move rule
    ends the game: on the move that ends it every move scores a draw, so the rook may be left
    en prise (of the first 14 games of generation 1, seed 0, 2 end so, both at ply 100)."""
    init: Literal["material", "random", "zero"] = "material"
    """First weights (TDConfig.init). material: the rook is worth 0.5 from the start, so the
    search keeps it; zero: losing the rook scores the same as keeping it (a draw is 0)."""
    check_depth: int = 2
    """Search depth of the check from the mate-in-3 position: a mate in 3 needs 5 plies, so at
    2 the search cannot see it and the evaluation must choose the first two moves (at 3 the
    untrained evaluations already mate, by their move order)."""
    mate_plies: int = 5
    """The check passes when the search mates within this many plies: 5 asks for the mate in 3
    itself; more asks only that the evaluation lead the 2-ply search to a mate."""
    defender_depth: int = 6
    """Plies the defender (the traditional evaluation) searches: at 6 it sees every mate of the
    mate in 3 and delays it as long as it can."""
    lead_plies: int = 60
    """The check's game goes on to this many plies (at least mate_plies): a later mate is the
    weaker result, that the learned evaluation leads the 2-ply search to a mate at all, and its
    first generation is reported beside the mate in 3's (the game is deterministic, so its first
    plies are the strict check's game). A game that does not mate costs its 60 plies against the
    6-ply defender: about 15 s on this 2-core machine, against the self-play's 30 s to 2 minutes."""
    lr: float = 0.01
    """Learning rate (published: 0.01)."""
    clock_ends: ClockEnd = "unfinished"
    """What a self-play game the fifty-move rule ends teaches (TDConfig.clock_ends). unfinished:
    no result, the last position's value stands. draw: the result 0; in KRvK every game that is
    not mated and keeps the rook ends so (no pawn moves, the only capture is of the rook), and
    those draws pull the values of a won ending towards 0. Measured over 8 generations, seeds
    0-2, neither choice makes the check robust (README, Self-play)."""
    seed: int = 0
    """Seed of the positions and games."""
    workers: int = 0
    """Processes playing games at once (0: one per core)."""

    def __post_init__(self):
        hints = typing.get_type_hints(KRKCheck)
        for name in ("init", "clock_ends", "model"):
            check_choice(name, getattr(self, name), literal_choices(hints[name]))
        for name in ("depth", "check_depth", "mate_plies", "defender_depth", "games", "hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lead_plies < self.mate_plies:
            raise ValueError(f"lead_plies must be at least mate_plies ({self.mate_plies}), got {self.lead_plies}")

    def td_config(self, name: str = "krk") -> TDConfig:
        """The self-play settings of this check (random KRvK starts, no random plies)."""
        return TDConfig(
            name=name,
            start="krk",
            model=self.model,
            hidden=self.hidden,
            init=self.init,
            depth=self.depth,
            games=self.games,
            lr=self.lr,
            clock_ends=self.clock_ends,
            seed=self.seed,
            workers=self.workers,
            random_plies=0,
        )


# Representations compared on hui_checkmate (supervised: who gets mated) -------------------------

REPRESENTATIONS = {
    "mailbox": "mailbox64",
    "piece list": "piece_list",
    "compressed piece list": "compressed_piece_list",
    "bitboard": "bitmap768",
    "antisymmetric bitboard": "antisymmetric_bitboard",
}
"""Hui's five representations and the encoders (training/encoders.py) that compute them."""


@dataclass
class RepresentationConfig:
    """The representation comparison: the same small network trained on hui_checkmate with each
    representation, several seeds each."""

    seeds: int = 3
    """Training runs per representation (seeds 0..seeds-1)."""
    hidden: int = 64
    """Hidden units of the network (one ReLU layer; the `lubeck` preset's shape)."""
    epochs: int = 5
    """Most epochs of each run (early stopping may end sooner)."""
    max_train_rows: int = 0
    """Use only the first rows of train (0: all)."""
    max_minutes: float = 1.0
    """Wall-time bound of each run."""


def compare_representations(store_root: str | Path, cfg: RepresentationConfig, log=print) -> list[dict]:
    """Train hui_checkmate's 2-class network with each representation and seed; one row per
    representation: mean and standard deviation of the test accuracy over the seeds."""
    from training.train import TrainConfig, train

    rows = []
    for label, encoder in REPRESENTATIONS.items():
        accs = []
        for seed in range(cfg.seeds):
            out = Path(store_root) / "models" / "hui_representations" / f"{encoder}-seed{seed}"
            result = train(
                TrainConfig(
                    store=str(store_root),
                    dataset="hui_checkmate",
                    model="lubeck",
                    encoder=encoder,
                    hidden=(cfg.hidden,),
                    epochs=cfg.epochs,
                    max_train_rows=cfg.max_train_rows,
                    max_minutes=cfg.max_minutes,
                    seed=seed,
                    device="cpu",
                    out=str(out),
                ),
                log=log,
            )
            accs.append(float(result.test["accuracy"]))
        rows.append(
            {
                "representation": label,
                "encoder": encoder,
                "seeds": cfg.seeds,
                "mean_accuracy": float(np.mean(accs)),
                "std_accuracy": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                "accuracies": accs,
            }
        )
    return rows


# KRvK: generations until the learned evaluation mates ------------------------------------------


def krk_generations(
    cfg: TDConfig,
    max_generations: int,
    fen: str = KRK_FEN,
    mate_plies: int = 5,
    defender_depth: int = 6,
    on_generation: Callable[[int, int | None], None] | None = None,
    check_depth: int | None = None,
    on_game: Callable[[], None] | None = None,
    lead_plies: int | None = None,
    stop_at_mate: bool = True,
    on_row: Callable[[dict], None] | None = None,
) -> dict:
    """Self-play on random KRvK positions (cfg with start='krk'), generation after generation,
    until the learned evaluation's search (check_depth, else cfg.depth) mates from `fen` within `mate_plies`
    against a defender that sees every mate inside its horizon (it delays the mate as long as
    it can); the first generation that does (0: the untrained weights already do), or None.
    The check's game goes on to `lead_plies` (default: mate_plies): `generations_to_lead` is the
    first generation whose search mates within those, or None.

    With `stop_at_mate` False every generation up to max_generations is played (whether a mate,
    once found, stays found); `on_row` gets each row of the curve as it is made.

    The curve has a row per generation: the check's moves and its mate (plies, or None; a mate
    after mate_plies counts only for the lead: `mate_in_3` says which), and for the generations
    played the self-play results, the share of those games that ended in mate (the self-play mate
    rate) and the TD error."""
    cfg = dataclasses.replace(cfg, start="krk", curve_games=0)
    params = initial_params(cfg)
    curve = []
    found = lead = None
    plies_bound = max(mate_plies, lead_plies or mate_plies)
    with GamePool(cfg.workers) as pool:
        for g in range(0, max_generations + 1):
            row: dict = {"generation": g}
            if g:
                gen = run_generation(pool, params, cfg, g, on_game)
                params = gen.params
                # In KRvK only White has mating material and White's only win is a mate (game_end: a
                # ply limit gives "*", every other end a draw), so its wins count the mates.
                mates = gen.results.get("1-0", 0)
                row.update(results=dict(gen.results), mate_rate=mates / gen.games, td_error=gen.td_error)
            game = check_game(
                make_model(cfg, params), chess.Board(fen), check_depth or cfg.depth, plies_bound, defender_depth
            )
            plies = game.plies if game.result == "1-0" else None
            strict = plies if plies is not None and plies <= mate_plies else None
            row.update(mate_plies=plies, mate_in_3=strict is not None, moves=str(game.game.mainline_moves()))
            curve.append(row)
            if on_row:
                on_row(row)
            if on_generation:
                on_generation(g, strict)
            if plies is not None and lead is None:
                lead = g
            if strict is not None and found is None:
                found = g
                if stop_at_mate:
                    break
    return {"fen": fen, "generations": found, "generations_to_lead": lead, "curve": curve, "params": params}


# A line of generations in the store ------------------------------------------------------------


@dataclass
class LineResult:
    generations: list[Generation]
    archives: list[StorePath]
    """The PGN archive of each generation (inside the store's archives folder)."""
    checkpoints: list[StorePath]
    history: list[dict]
    """Every generation of the line so far (earlier runs' too), as Generation.summary()."""


def resumable(checkpoint: StorePath | str | None, cfg: TDConfig) -> bool:
    """Whether a checkpoint continues the line `cfg` describes (same name and learning settings)."""
    if checkpoint is None:
        return False
    from pipeline import storage
    from training.checkpoints import store_location

    if not storage.exists(store_location(checkpoint)):
        return False
    _, old, _ = load_checkpoint(checkpoint)
    keep = (
        "name",
        "learner",
        "model",
        "hidden",
        "init",
        "lam",
        "lr",
        "depth",
        "games",
        "random_plies",
        "max_plies",
        "clock_ends",
        "start",
        "seed",
    )
    return all(getattr(old, k) == getattr(cfg, k) for k in keep)


def play_line(
    store,
    cfg: TDConfig,
    resume_from: StorePath | str | None = None,
    on_game: Callable[[], None] | None = None,
    log: Callable[[str], None] = print,
) -> LineResult:
    """cfg.generations generations of the line cfg.name, after the checkpoint resume_from when
    it continues this line (else from the untrained weights): each generation's games as an
    archive in the store (Store.add_archive: ingest sees it) and its weights as a checkpoint."""
    from pipeline import storage

    params, history, first = initial_params(cfg), [], 1
    if resumable(resume_from, cfg):
        params, _, ck = load_checkpoint(resume_from)
        history, first = list(ck["history"]), ck["generation"] + 1
        log(f"{cfg.name}: continuing after generation {ck['generation']} ({resume_from})")
    out = LineResult([], [], [], history)
    folder = store.archives_dir / "selfplay" / cfg.name
    done = [p for p in storage.list_files(folder, ".pgn") if re.fullmatch(r"gen-\d+\.pgn", p.name)]
    if first == 1 and done:
        # A fresh start of a name already used: new archives after the old ones, never over them
        # (an archive's games stay in the store under its key).
        first = max(int(p.name[4:-4]) for p in done) + 1
        log(f"{cfg.name}: starting afresh (no checkpoint of these settings), as generation {first}")
    with GamePool(cfg.workers) as pool:
        for number in range(first, first + cfg.generations):
            gen = run_generation(pool, params, cfg, number, on_game)
            params = gen.params
            # Through the store's add path: a name another run took meanwhile gets a numbered one.
            key, pgn = store.add_archive_data(gen.pgn.encode("utf-8"), f"selfplay/{cfg.name}/gen-{number:04d}.pgn")
            ck = store.root / "selfplay" / cfg.name / f"gen-{number:04d}.pt"
            history.append({**gen.summary(), "archive": key, "checkpoint": str(ck)})
            save_checkpoint(ck, params, cfg, number, history, key)
            out.generations.append(gen)
            out.archives.append(pgn)
            out.checkpoints.append(ck)
            wr = "" if gen.win_ratio is None else f", {gen.win_ratio:.0%} won against random"
            log(
                f"generation {number}: {gen.games} games {gen.results} in {gen.seconds:.1f}s "
                f"({gen.games_per_second:.2f} games/s, {gen.nodes_per_second:,.0f} positions searched/s), "
                f"TD error {gen.td_error:.4f}{wr}"
            )
    return out
