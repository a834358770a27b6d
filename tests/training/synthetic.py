"""Small dataset split files for cheap training-loop tests (no Stockfish, no shared data).

Positions come from random legal play (python-chess, seeded), encoded as ingest writes them
(pipeline.play.search.board_arrays); a game is 40 plies of one random line. Targets are the
dataset's kind: classes of the material balance with a seeded share of rows flipped (so a
model can beat neither baseline trivially), the winner for DeepChess's pairs (1 White won, 0
Black won, per game), a value in pawns for the piece values."""

from __future__ import annotations

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.datasets.datasets import dataset_dir
from pipeline.play.search import board_arrays
from pipeline.store.store import Store

PLIES = 40
VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


def random_games(games: int, seed: int) -> tuple[list[chess.Board], np.ndarray]:
    """PLIES + 1 positions of each of `games` random games, and each position's game number."""
    rng = np.random.default_rng(seed)
    boards, game = [], []
    for g in range(games):
        b = chess.Board()
        for _ in range(PLIES + 1):
            boards.append(b.copy(stack=False))
            game.append(g)
            moves = list(b.legal_moves)
            if not moves:
                break
            captures = [m for m in moves if b.is_capture(m)]  # captures first: material moves apart
            pick = captures if captures and rng.random() < 0.7 else moves
            b.push(pick[int(rng.integers(len(pick)))])
    return boards, np.array(game)


def white_material(board: chess.Board) -> int:
    """White's material minus Black's in pawns (P 1 N 3 B 3 R 5 Q 9)."""
    return sum(VALUES[p.piece_type] * (1 if p.color else -1) for p in board.piece_map().values())


def write_dataset(store: Store, dataset: str, games: int = 60, seed: int = 0, noise: float = 0.2) -> dict[str, int]:
    """train/val/test of `dataset` in `store` (games split 60/20/20 by game); rows per split.

    Class datasets: 3 classes from White's material (0 below -1, 1 within, 2 above), a `noise`
    share of rows given a random class; deepchess: the game's winner (even games White);
    piece_values: White's material in pawns plus noise, and `result_score`."""
    boards, game = random_games(games, seed)
    rng = np.random.default_rng([seed, 1])
    material = np.array([white_material(b) for b in boards])
    if dataset == "deepchess":
        target = (game % 2 == 0).astype(np.float64)
    elif dataset == "piece_values":
        target = material + rng.normal(0, 0.5, len(boards))
    else:
        target = np.where(material < -1, 0, np.where(material > 1, 2, 1)).astype(np.float64)
        flip = rng.random(len(boards)) < noise
        target[flip] = rng.integers(0, 3, int(flip.sum()))
    planes, white, castling = board_arrays(boards)
    order = rng.permutation(games)
    cut = {
        "train": order[: games * 3 // 5],
        "val": order[games * 3 // 5 : games * 4 // 5],
        "test": order[games * 4 // 5 :],
    }
    folder = dataset_dir(store, dataset)
    folder.mkdir(parents=True, exist_ok=True)
    rows = {}
    for split, chosen in cut.items():
        idx = np.flatnonzero(np.isin(game, chosen))
        cols = {
            "planes": pa.array([bytes(planes[i]) for i in idx], type=pa.binary(96)),
            "side_to_move": ["w" if white[i] else "b" for i in idx],
            "castling": pa.array(castling[idx], pa.uint8()),
            "target": pa.array(target[idx]),
            "game_id": pa.array(game[idx].astype(np.int64)),
        }
        if dataset == "piece_values":
            cols["result_score"] = pa.array((game[idx] % 2 == 0).astype(np.float64))
            cols["fullmove_number"] = pa.array([boards[i].fullmove_number for i in idx], pa.int32())  # game_phase
        pq.write_table(pa.table(cols), folder / f"{split}.parquet", row_group_size=256)
        rows[split] = len(idx)
    return rows
