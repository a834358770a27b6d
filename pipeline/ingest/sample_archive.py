"""A sample archive made by Stockfish playing itself, for the demo and for tests."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import chess
import chess.engine
import chess.pgn

from pipeline.store.store_files import atomic_path


@dataclass(frozen=True)
class SampleArchiveConfig:
    """What the sample archive holds."""

    games: int = 24
    """Number of games."""
    skill_levels: tuple[int, ...] = (2, 8, 14, 20)
    """Stockfish 'Skill Level' values; each game pairs two of them."""
    nodes: int = 3000
    """Node budget per move (keeps the archive fast to make on any machine)."""
    random_plies: int = 4
    """Random legal moves played before the engines take over, so openings vary."""
    max_plies: int = 200
    """Games still going at this length end unfinished (result '*')."""
    seed: int = 0
    """Seed for the random openings and pairings."""


def play_games(engine_path: str, out: Path, config: SampleArchiveConfig = SampleArchiveConfig(), progress=None) -> Path:
    """Write config.games self-play games to `out` (atomically) and return it."""
    rng = random.Random(config.seed)
    engines = [chess.engine.SimpleEngine.popen_uci(engine_path) for _ in range(2)]
    try:
        name = engines[0].id.get("name", "Stockfish")
        with atomic_path(Path(out)) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for i in range(config.games):
                skills = (rng.choice(config.skill_levels), rng.choice(config.skill_levels))
                for engine, skill in zip(engines, skills):
                    engine.configure({"Skill Level": skill})
                game = _play(engines, config, rng, i)
                game.headers.update(
                    {
                        "Event": "chess-pipeline self-play",
                        "Site": "chess-pipeline selfplay",
                        # PGN's unknown date, not today's: the same config makes the same bytes
                        # on any day, so the archive added again is the one partition.
                        "Date": "????.??.??",
                        "Round": str(i + 1),
                        "White": f"{name} skill {skills[0]}",
                        "Black": f"{name} skill {skills[1]}",
                        "TimeControl": f"nodes/{config.nodes}",
                    }
                )
                print(game, file=f, end="\n\n")
                if progress:
                    progress(i + 1, config.games)
    finally:
        for engine in engines:
            engine.quit()
    return Path(out)


def _play(engines, config: SampleArchiveConfig, rng: random.Random, game_number: int) -> chess.pgn.Game:
    board = chess.Board()
    for _ in range(config.random_plies):
        moves = list(board.legal_moves)
        if not moves or board.is_game_over():
            break
        board.push(rng.choice(moves))
    limit = chess.engine.Limit(nodes=config.nodes)
    while not board.is_game_over(claim_draw=True) and board.ply() < config.max_plies:
        engine = engines[0 if board.turn == chess.WHITE else 1]
        # A new `game` key makes python-chess send ucinewgame: games stay independent.
        board.push(engine.play(board, limit, game=game_number).move)
    game = chess.pgn.Game.from_board(board)
    outcome = board.outcome(claim_draw=True)
    game.headers["Result"] = outcome.result() if outcome else "*"
    game.headers["Termination"] = outcome.termination.name.lower() if outcome else "unterminated"
    return game
