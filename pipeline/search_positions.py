"""Positions of the kind a search scores, for the regression target (the dataset
`sabatelli_regression_search`, pipeline.datasets).

A search scores the children of every node it visits, most of them after moves no player would
make; a dataset of game positions shows a network none of them, and a small network overfits
its few thousand games. Stockfish's static evaluation, the target of a `sabatelli_regression`
set on static labels, costs well under a millisecond a position, so the positions a search
meets can be labelled in bulk.

Each round plays `children` of the legal moves of every train row so far (the dataset's, then
the earlier rounds' too), chosen at random (seeded by the round's seed and the row). It keeps
each child that is:
- not over and not in check (`eval` scores no position in check);
- not a position of any split (the leakage guard's rule for val and test; a train position
  has its row already);
- met for the first time.

Each is labelled by Stockfish's `eval` (pipeline.stockfish_eval, one engine a worker) from a FEN
with halfmove clock 0, as `chess-pipeline label --static` labels every position (Stockfish
scales its evaluation down as the fifty-move count grows), in whole centipawns as the labels
table holds them. Its row has the dataset's columns: the position's, the label's, both targets
(the linear map of the centipawns clipped at `clip_cp`, and the win probability) from the side
to move's view or White's as `pov` says, and `mirrored`; the game's columns are null.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import chess
import chess.polyglot
import numpy as np
import pyarrow as pa

from pipeline.encoding import fens_from_columns, zobrist
from pipeline.parallel import ordered_map, task_seed
from pipeline.search import board_arrays

CHUNK = 2048
"""Children a worker labels in one task."""


def children(fens: Sequence[str], count: int, seed: int, held_out: set[int]) -> list[chess.Board]:
    """`count` random children of each position (fewer where it has fewer moves), those not
    over, not in check and not held out; each position once, its clocks 0 and 1. The keys of
    the children kept are added to `held_out`."""
    out = []
    for row, fen in enumerate(fens):
        board = chess.Board(fen)
        moves = list(board.legal_moves)
        for move in random.Random(task_seed(seed, row)).sample(moves, min(count, len(moves))):
            board.push(move)
            if not board.is_check() and not board.is_game_over(claim_draw=False):
                key = chess.polyglot.zobrist_hash(board)  # = position_key (pipeline.encoding.zobrist)
                if key not in held_out:
                    held_out.add(key)
                    child = board.copy(stack=False)
                    child.halfmove_clock, child.fullmove_number = 0, 1  # as `label` asks (module docstring)
                    out.append(child)
            board.pop()
    return out


def _ep(board: chess.Board) -> int | None:
    """The store's en passant square: only where a pawn of the side to move could take there."""
    return board.ep_square if board.has_pseudo_legal_en_passant() else None


def _engine(binary: str):
    from pipeline.stockfish_eval import StockfishStaticEvaluator

    return StockfishStaticEvaluator(binary)


def _label(fens: list[str], evaluator) -> list[float]:
    return evaluator.evaluate([chess.Board(f) for f in fens]).tolist()


def label(
    boards: Sequence[chess.Board],
    binary: str,
    workers: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Stockfish's static evaluation of each board, the side to move's centipawns, in
    `workers` engine processes (0: one per usable core); progress(positions done, total)."""
    tasks = [[b.fen() for b in boards[i : i + CHUNK]] for i in range(0, len(boards), CHUNK)]

    def done(tasks_done: int, _total: int) -> None:
        if progress:
            progress(min(tasks_done * CHUNK, len(boards)), len(boards))

    parts = ordered_map(_label, tasks, workers, _engine, (binary,), progress=done)
    return np.array([x for part in parts for x in part], dtype=np.float64)


def rows_of(boards: Sequence[chess.Board], cp: np.ndarray, values: dict, schema: pa.Schema) -> pa.Table:
    """The new rows in the train file's schema: the position (its key, planes, side to move,
    castling, en passant, clocks), the label (White's centipawns, the row's score, both targets,
    `target` the one `target_kind` names) and the `mirrored` flag; the game's columns null.
    `cp`: the side to move's centipawns; the score and targets take the dataset's `pov`."""
    planes, white, castling = board_arrays(list(boards))
    n = len(boards)
    clip_cp = float(values["clip_cp"])
    mirrored = ~white if values["pov"] == "side_to_move" else np.zeros(n, dtype=bool)
    white_cp = np.round(np.where(white, cp, -cp))  # whole centipawns, as `label` stores them
    score = np.where(mirrored, -white_cp, white_cp)  # the row's view
    linear = (np.clip(score, -clip_cp, clip_cp) + clip_cp) / (2.0 * clip_cp)
    win_prob = 1.0 / (1.0 + 10.0 ** (-score / float(values["wp_scale"])))
    ep = [_ep(b) for b in boards]
    columns = {
        "planes": pa.array([p.tobytes() for p in planes], type=pa.binary(96)),
        "side_to_move": pa.array(np.where(white, "w", "b").tolist()),
        "castling": pa.array(castling, type=pa.uint8()),
        "position_key": pa.array(zobrist(planes, castling, np.array([-1 if e is None else e for e in ep]), white)),
        "ep_square": pa.array(ep, type=pa.int8()),
        "halfmove_clock": pa.array([b.halfmove_clock for b in boards], type=pa.uint32()),
        "fullmove_number": pa.array([b.fullmove_number for b in boards], type=pa.uint32()),
        "cp_white": pa.array(white_cp.astype(np.int32)),
        "score_white": pa.array(white_cp.astype(np.int32)),
        "score": pa.array(score.astype(np.int32)),
        "win_prob": pa.array(win_prob),
        "mirrored": pa.array(mirrored),
        "linear": pa.array(linear),
        "target": pa.array(win_prob if values["target_kind"] == "win_prob" else linear),
        "split": pa.array(["train"] * n),
    }
    arrays = [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def grow(
    train: pa.Table,
    held_out: set[int],
    values: dict,
    binary: str,
    workers: int = 0,
    log: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pa.Table, list[int]]:
    """`train` (the dataset's train rows, in its file's columns) and the rows of each round
    (`search_children`, `search_seed` in `values`; module docstring); the children added each
    round. `held_out`: every position key of the dataset's splits (the keys added are put in)."""
    added = []
    for r, count in enumerate(values["search_children"]):
        cols = train.select(["planes", "side_to_move", "castling", "ep_square"]).to_pydict()
        fens = fens_from_columns(cols["planes"], cols["side_to_move"], cols["castling"], cols["ep_square"])
        boards = children(fens, count, values["search_seed"] + r, held_out)
        log(f"round {r + 1}: {len(boards):,} new positions from {len(fens):,} train rows, {count} children each")
        new = rows_of(boards, label(boards, binary, workers, progress), values, train.schema)
        train = pa.concat_tables([train, new])
        added.append(len(new))
    return train, added
