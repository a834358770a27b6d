"""The published checks of a learned evaluation: batches of games against the random mover
(Hui's win ratio), the match against the traditional evaluation at equal depth, and the KRvK
check (self-play on KRvK positions until the search mates from the mate in 3)."""

from __future__ import annotations

import dataclasses
import io
import math
import random
from collections.abc import Callable

import chess
import chess.pgn
import numpy as np

from pipeline.play.matches import GameResult, MatchResult, play_game
from pipeline.play.search import AlphaBeta, MaterialEvaluator, RandomPlayer, SearchPlayer
from training.td.config import TDConfig
from training.td.models import initial_params, make_model
from training.td.play import (
    GamePool,
    game_seed,
    player_name,
    random_krk,
    run_generation,
    td_player,
    vs_random_game,
    vs_traditional_game,
    won,
)

KRK_FEN = "8/7k/8/5K2/8/8/8/4R3 w - - 0 1"
"""Our KRvK mate-in-3 position (White Kf5, Re1; Black Kh7; White to move: 1. Kf6 Kg8 2. Rh1
Kf8 3. Rh8#). The source's own diagram is not available to us; the tests check that this one
is a mate in exactly 3 that a 3-ply search does not see."""


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
    from pipeline.play.openings import sabatelli_openings

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
