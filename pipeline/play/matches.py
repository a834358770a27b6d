"""Matches between players under FIDE's draw rules, written as PGN; Elo from the results.

The rules, as Sabatelli's thesis states them: checkmate and stalemate end the game; so do a
dead position (python-chess's insufficient material), a fivefold repetition and seventy-five
moves without a capture or pawn move (automatic draws). A threefold repetition or fifty moves
are draws when claimed; with `claim_draws` (the default, as engine match runners do) the
player to move claims as soon as the position allows it. `max_plies` ends a game still going
(result '*', Hui's 80-ply test counts only wins inside it).
"""

from __future__ import annotations

import datetime as dt
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import chess
import chess.pgn
import numpy as np
import pyarrow as pa

from pipeline.play.search import Player
from pipeline.play.suites import EpdPosition
from pipeline.store.schemas import MATCH_GAMES_SCHEMA
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path, write_parquet

SITE = "chess-pipeline"


@dataclass
class GameResult:
    white: str
    black: str
    result: str
    """1-0, 0-1, 1/2-1/2, or * (stopped at max_plies)."""
    termination: str
    plies: int
    opening: str
    game: chess.pgn.Game

    @property
    def white_score(self) -> float | None:
        return {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}.get(self.result)

    def __getstate__(self) -> dict:
        """Pickled (to and from the processes playing games) with the game as PGN text: a long
        game's chain of nodes is deeper than pickle's recursion limit."""
        return {**self.__dict__, "game": str(self.game)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({**state, "game": chess.pgn.read_game(io.StringIO(state["game"]))})


def game_end(board: chess.Board, claim_draws: bool) -> tuple[str, str] | None:
    """(result, termination) when the rules end the game now, else None."""
    if board.is_checkmate():
        return ("0-1" if board.turn == chess.WHITE else "1-0"), "checkmate"
    if board.is_stalemate():
        return "1/2-1/2", "stalemate"
    if board.is_insufficient_material():
        return "1/2-1/2", "insufficient material"
    if board.is_fivefold_repetition():
        return "1/2-1/2", "fivefold repetition"
    if board.is_seventyfive_moves():
        return "1/2-1/2", "seventy-five-move rule"
    if claim_draws:
        if board.is_repetition(3):
            return "1/2-1/2", "threefold repetition (claimed)"
        if board.halfmove_clock >= 100:
            return "1/2-1/2", "fifty-move rule (claimed)"
    return None


def play_game(
    white: Player,
    black: Player,
    start: chess.Board,
    max_plies: int = 0,
    claim_draws: bool = True,
    opening: str = "",
    event: str = "chess-pipeline match",
    round_: str = "1",
) -> GameResult:
    """One game from `start`; every move a player returns is checked for legality."""
    board = start.copy(stack=False)
    for p in (white, black):
        if hasattr(p, "new_game"):
            p.new_game()
    end = game_end(board, claim_draws)
    plies = 0
    while end is None:
        if max_plies and plies >= max_plies:
            end = ("*", f"ply limit {max_plies}")
            break
        player = white if board.turn == chess.WHITE else black
        move = player.choose(board)
        if move is None or not board.is_legal(move):
            raise RuntimeError(f"{player.name} played an illegal move {move} in {board.fen()}")
        board.push(move)
        plies += 1
        end = game_end(board, claim_draws)
    result, termination = end
    game = chess.pgn.Game.from_board(board)
    game.headers.update(
        {
            "Event": event,
            "Site": SITE,
            "Date": dt.date.today().strftime("%Y.%m.%d"),
            "Round": round_,
            "White": white.name,
            "Black": black.name,
            "Result": result,
            "Termination": termination,
            "PlyCount": str(plies),
        }
    )
    if opening:
        game.headers["Opening"] = opening
    return GameResult(white.name, black.name, result, termination, plies, opening, game)


@dataclass
class MatchSpec:
    name: str
    a: Callable[[], Player]
    b: Callable[[], Player]
    max_plies: int = 0
    claim_draws: bool = True


@dataclass
class MatchResult:
    name: str
    a: str
    b: str
    games: list[GameResult] = field(default_factory=list)

    def score(self, player: str) -> tuple[float, int, int, int, int]:
        """(points, wins, draws, losses, unfinished) of one side."""
        pts, w, d, lost, u = 0.0, 0, 0, 0, 0
        for g in self.games:
            s = g.white_score
            if s is None:
                u += 1
                continue
            mine = s if g.white == player else 1.0 - s
            pts += mine
            w += mine == 1.0
            d += mine == 0.5
            lost += mine == 0.0
        return pts, w, d, lost, u


def play_pairing(spec: MatchSpec, opening: EpdPosition, index: int, colour: int) -> GameResult:
    """One game of a match: opening number `index` (from 0), a White when colour is 0, b when 1.
    The players are built for this game alone (fresh search tables, a fresh engine), so a game
    depends on its opening and colours only, not on the games played before it or where. A
    player with a seed (the random mover) is reseeded from the game's place in the match."""
    a, b = spec.a(), spec.b()
    try:
        for p in (a, b):
            if hasattr(p, "seed_game"):
                p.seed_game(spec.name, index, colour)
        white, black = (a, b) if colour == 0 else (b, a)
        return play_game(
            white,
            black,
            opening.board,
            spec.max_plies,
            spec.claim_draws,
            opening.id,
            spec.name,
            f"{index + 1}.{colour + 1}",
        )
    finally:
        a.close()
        b.close()


def pairings(openings: Sequence[EpdPosition]) -> list[tuple[int, int]]:
    """(opening index, colour) of every game of a match, in playing order: each opening twice,
    a White first."""
    return [(i, colour) for i in range(len(openings)) for colour in (0, 1)]


def match_result(spec: MatchSpec, games: list[GameResult]) -> MatchResult:
    """The match of `games` (pairings order); the players' names are those its first game used."""
    if games:
        a, b = games[0].white, games[0].black
    else:  # no openings: the names from players built for nothing else
        pa, pb = spec.a(), spec.b()
        a, b = pa.name, pb.name
        pa.close()
        pb.close()
    return MatchResult(spec.name, a, b, games)


def play_match(
    spec: MatchSpec, openings: list[EpdPosition], progress: Callable[[int, int], None] | None = None
) -> MatchResult:
    """Each opening twice, colours swapped: a plays White first. Every game here, one after the
    other (pipeline.play.evaluation.run_matches spreads a model's matches over processes)."""
    games, todo = [], pairings(openings)
    for i, colour in todo:
        games.append(play_pairing(spec, openings[i], i, colour))
        if progress:
            progress(len(games), len(todo))
    return match_result(spec, games)


def write_pgn(games: Iterable[GameResult], path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for g in games:
            print(g.game, file=f, end="\n\n")


def write_games(store: Store, asset: str, run_id: str, matches: Iterable[MatchResult]) -> tuple[Path, int]:
    """Every game of `matches` as PGN (matches/<asset>/<run_id>.pgn, an archive the pipeline can
    ingest) and one match_games row each (match_games/<asset>/<run_id>.parquet); returns the
    PGN's path and the number of games."""
    games = [(m.name, g) for m in matches for g in m.games]
    pgn = store.root / "matches" / asset / f"{run_id}.pgn"
    write_pgn([g for _, g in games], pgn)
    made = dt.datetime.now(dt.UTC)
    table = pa.table(
        {
            "asset": [asset] * len(games),
            "match": [name for name, _ in games],
            "white": [g.white for _, g in games],
            "black": [g.black for _, g in games],
            "result": [g.result for _, g in games],
            "termination": [g.termination for _, g in games],
            "plies": [g.plies for _, g in games],
            "opening": [g.opening for _, g in games],
            "round": [g.game.headers.get("Round", "") for _, g in games],
            "pgn_path": [str(pgn)] * len(games),
            "run_id": [run_id] * len(games),
            "materialised_at": [made] * len(games),
        },
        schema=MATCH_GAMES_SCHEMA,
    )
    write_parquet(store.root / "match_games" / asset / f"{run_id}.parquet", table)
    return pgn, len(games)


@dataclass
class EloFit:
    ratings: dict[str, float]
    """Relative to the anchor (0)."""
    errors: dict[str, float]
    """95% half-widths (1.96 standard errors) of each rating against the pool's average, as
    BayesElo reports them: the anchor only shifts the scale, it is no more certain than others."""
    games: dict[str, int]
    anchor: str


def fit_elo(games: Iterable[tuple[str, str, float]], anchor: str, prior_sd: float = 1000.0) -> EloFit:
    """Maximum a posteriori Elo ratings from (white, black, white's score) results: the logistic
    model P(a beats b) = 1 / (1 + 10^((Rb - Ra) / 400)), draws as half a point, and a wide normal
    prior (sd `prior_sd`) so a player with only wins still gets a finite rating. Error bars from
    the inverse Hessian, for each rating minus the pool's average."""
    games = list(games)
    names = sorted({g[0] for g in games} | {g[1] for g in games})
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} played no game")
    idx = {n: i for i, n in enumerate(names)}
    n = len(names)
    w = np.array([idx[g[0]] for g in games])
    b = np.array([idx[g[1]] for g in games])
    s = np.array([g[2] for g in games], dtype=np.float64)
    k = math.log(10) / 400
    r = np.zeros(n)
    prior = 1.0 / prior_sd**2
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-k * (r[w] - r[b])))
        grad = np.zeros(n)
        np.add.at(grad, w, k * (s - p))
        np.add.at(grad, b, -k * (s - p))
        grad -= prior * r
        h = k * k * p * (1 - p)
        hess = np.zeros((n, n))
        np.add.at(hess, (w, w), -h)
        np.add.at(hess, (b, b), -h)
        np.add.at(hess, (w, b), h)
        np.add.at(hess, (b, w), h)
        hess -= prior * np.eye(n)
        step = np.linalg.solve(hess, grad)
        r -= step
        if np.abs(step).max() < 1e-6:
            break
    cov = np.linalg.inv(-hess)
    centre = np.eye(n) - np.full((n, n), 1.0 / n)  # r - mean(r)
    var = np.diag(centre @ cov @ centre.T)
    a = idx[anchor]
    ratings, errors, counts = {}, {}, {}
    for name, i in idx.items():
        ratings[name] = float(r[i] - r[a])
        errors[name] = float(1.96 * math.sqrt(max(var[i], 0.0)))
        counts[name] = int((w == i).sum() + (b == i).sum())
    return EloFit(ratings, errors, counts, anchor)
