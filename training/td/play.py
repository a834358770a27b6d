"""Self-play: one game (play_selfplay_game), the games against the random mover and the
traditional evaluation, a generation played in a process pool then learnt from in game order
(run_generation), and a line of generations in the store, continued from its checkpoint
(play_line)."""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

import chess
import chess.pgn
import numpy as np

from pipeline.parallel import task_seed, usable_cores, watch_parent
from pipeline.play.matches import GameResult, game_end, play_game
from pipeline.play.search import AlphaBeta, MaterialEvaluator, RandomPlayer, SearchPlayer
from pipeline.research.intervals import wilson_interval
from pipeline.store.storage_paths import StorePath
from training.td.checkpoints import load_checkpoint, save_checkpoint
from training.td.config import TDConfig
from training.td.models import FEATURES, TDEvaluator, antisymmetric_features, initial_params, make_model
from training.td.update import GameRecord, outcome_value, td_update

SITE = "chess-pipeline selfplay"
"""The PGN Site of self-play games: ingest files them under source 'selfplay'."""


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
            # PGN's unknown date, not the day played: a generation played again on another day
            # (after a kill between its archive and its checkpoint) is the same bytes, so the
            # archive already in the store, not a second partition of the same games.
            "Date": "????.??.??",
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


@dataclass
class LineResult:
    generations: list[Generation]
    """The generations this call played (not those a killed run of the same request played)."""
    archives: list[StorePath]
    """The PGN archive of each generation of the request (inside the store's archives folder),
    a killed run's included."""
    checkpoints: list[StorePath]
    """The checkpoint of each generation of the request, a killed run's included."""
    history: list[dict]
    """Every generation of the line so far (earlier runs' too), as Generation.summary()."""


LINE_SETTINGS = (
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
"""The TDConfig fields that make a line: a checkpoint continues `cfg` when they are equal (the
others, e.g. generations, workers, curve_games, change neither the games nor the weights)."""


def same_line(old: TDConfig, cfg: TDConfig) -> bool:
    return all(getattr(old, k) == getattr(cfg, k) for k in LINE_SETTINGS)


def resumable(checkpoint: StorePath | str | None, cfg: TDConfig) -> bool:
    """Whether a checkpoint continues the line `cfg` describes (same name and learning settings)."""
    if checkpoint is None:
        return False
    from pipeline.store import storage
    from training.checkpoints import store_location

    if not storage.exists(store_location(checkpoint)):
        return False
    _, old, _ = load_checkpoint(checkpoint)
    return same_line(old, cfg)


def checkpoint_path(store, cfg: TDConfig, number: int) -> StorePath:
    """Where generation `number` of the line cfg.name keeps its weights."""
    return store.root / "selfplay" / cfg.name / f"gen-{number:04d}.pt"


def _steps(history: list[dict]) -> list[tuple[int, str]]:
    """A line's generations as (number, archive key): what two histories share when one
    continues the other (the checkpoints' paths would change with the store's place)."""
    return [(h.get("generation"), h.get("archive")) for h in history]


def interrupted_run(store, cfg: TDConfig, before: list[dict]) -> tuple[StorePath, int] | None:
    """The furthest checkpoint a killed run of this very request left (or an earlier run of it
    that no lineage recorded): of the line cfg (same settings), its history `before` followed by
    1 to cfg.generations generations; with the number of generations it got through. None when
    there is none. Seeds depend only on (seed, generation), so such a run played exactly the
    games this one would."""
    from pipeline.store import storage

    best: tuple[StorePath, int] | None = None
    for path in storage.list_files(store.root / "selfplay" / cfg.name, ".pt"):
        if not re.fullmatch(r"gen-\d+\.pt", path.name):
            continue
        try:
            _, old, ck = load_checkpoint(path)
        except ValueError:  # another encoder: not this line's
            continue
        history = list(ck["history"])
        extra = len(history) - len(before)
        if (
            same_line(old, cfg)
            and 0 < extra <= cfg.generations
            and _steps(history[: len(before)]) == _steps(before)
            and (best is None or extra > best[1])
        ):
            best = (path, extra)
    return best


def play_line(
    store,
    cfg: TDConfig,
    resume_from: StorePath | str | None = None,
    on_game: Callable[[], None] | None = None,
    log: Callable[[str], None] = print,
) -> LineResult:
    """cfg.generations generations of the line cfg.name, after the checkpoint resume_from when
    it continues this line (else from the untrained weights): each generation's games as an
    archive in the store (Store.add_archive: ingest sees it) and its weights as a checkpoint.

    Run again after being killed (the same request: the same resume_from and settings), it
    continues after the last checkpoint the killed run wrote, as if never interrupted: the same
    generation numbers, so the same seeds, games and weights (the update carries no optimizer
    state between generations: the checkpoint's weights are all there is), and a generation
    played again writes the same bytes, so its archive is the one already there (one key)."""
    from pipeline.store import storage

    params, history, first = initial_params(cfg), [], 1
    if resumable(resume_from, cfg):
        params, _, ck = load_checkpoint(resume_from)
        history, first = list(ck["history"]), ck["generation"] + 1
        log(f"{cfg.name}: continuing after generation {ck['generation']} ({resume_from})")
    out = LineResult([], [], [], history)
    todo = cfg.generations
    if killed := interrupted_run(store, cfg, history):
        path, played = killed
        params, _, ck = load_checkpoint(path)
        archives = store.find_archives()
        for h in ck["history"][len(history) :]:
            out.archives.append(archives[h["archive"]])
            out.checkpoints.append(checkpoint_path(store, cfg, h["generation"]))
        history[:] = list(ck["history"])
        first, todo = ck["generation"] + 1, cfg.generations - played
        log(f"{cfg.name}: {played} of {cfg.generations} generations already played (to {path}), continuing")
    folder = store.archives_dir / "selfplay" / cfg.name
    done = [p for p in storage.list_files(folder, ".pgn") if re.fullmatch(r"gen-\d+\.pgn", p.name)]
    if not history and done:
        # A fresh start of a name already used: new archives after the old ones, never over them
        # (an archive's games stay in the store under its key).
        first = max(int(p.name[4:-4]) for p in done) + 1
        log(f"{cfg.name}: starting afresh (no checkpoint of these settings), as generation {first}")
    with GamePool(cfg.workers) as pool:
        for number in range(first, first + todo):
            gen = run_generation(pool, params, cfg, number, on_game)
            params = gen.params
            # Through the store's add path: a name another run took meanwhile gets a numbered one.
            key, pgn = store.add_archive_data(gen.pgn.encode("utf-8"), f"selfplay/{cfg.name}/gen-{number:04d}.pgn")
            ck = checkpoint_path(store, cfg, number)
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
