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

Each is labelled by Stockfish's `eval` through the run's engine pool (pipeline.engine, with its
retries and checks), from a FEN with halfmove clock 0, as `chess-pipeline label --static`
labels every position (Stockfish scales its evaluation down as the fifty-move count grows): the
number a label would hold. A child the engine gives no evaluation (after the pool's retries)
is left out and counted. Its row has the dataset's columns: the position's, the label's, both targets
(the linear map of the centipawns clipped at `clip_cp`, and the win probability) from the side
to move's view or White's as `pov` says, and `mirrored`; the game's columns are null.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import chess
import chess.polyglot
import numpy as np
import pyarrow as pa

from pipeline.encoding import fens_from_columns, zobrist
from pipeline.engine import EngineError, EnginePool, Evaluation, Failure, Job, Limit
from pipeline.parallel import task_seed
from pipeline.search import board_arrays

PROGRESS_EVERY = 4096
"""Children labelled between two progress reports."""


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


def label(
    boards: Sequence[chess.Board], pool: EnginePool, progress: Callable[[int, int], None] | None = None
) -> tuple[np.ndarray, str]:
    """Stockfish's static evaluation of each board (White's centipawns; NaN where the engine
    gave none after the pool's retries), by the run's engines as `label --static` labels, and
    the first failure met ('' when every board has one); progress(boards done, boards)."""
    cp, why = np.full(len(boards), np.nan), ""
    jobs = (Job(i, b.fen(), b.turn == chess.WHITE) for i, b in enumerate(boards))
    for done, r in enumerate(pool.run(jobs, Limit("static")), 1):
        if isinstance(r, Evaluation) and r.cp is not None:
            cp[r.job.id] = r.cp
        elif not why:
            why = r.reason if isinstance(r, Failure) else "no centipawn figure"
        if progress and (done % PROGRESS_EVERY == 0 or done == len(boards)):
            progress(done, len(boards))
    return cp, why


def rows_of(boards: Sequence[chess.Board], white_cp: np.ndarray, values: dict, schema: pa.Schema) -> pa.Table:
    """The new rows in the train file's schema: the position (its key, planes, side to move,
    castling, en passant, clocks), the label (White's centipawns, the row's score, both targets,
    `target` the one `target_kind` names) and the `mirrored` flag; the game's columns null.
    The score and targets take the dataset's `pov`."""
    planes, white, castling = board_arrays(list(boards))
    n = len(boards)
    clip_cp = float(values["clip_cp"])
    mirrored = ~white if values["pov"] == "side_to_move" else np.zeros(n, dtype=bool)
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


@dataclass
class Grown:
    train: pa.Table
    """The train rows and then each round's."""
    added: list[int] = field(default_factory=list)
    """Rows each round added."""
    unlabelled: int = 0
    """Children left out: the engine gave no evaluation (after the pool's retries)."""


def grow(
    train: pa.Table,
    held_out: set[int],
    values: dict,
    pool: EnginePool,
    log: Callable[[str], None] = print,
    progress: Callable[[str], Callable[[int, int], None]] | None = None,
) -> Grown:
    """`train` (the dataset's train rows, in its file's columns) grown by the rounds of
    `search_children` (module docstring), round r's moves drawn with seed `search_seed` + r.
    `held_out`: every position key of the dataset's splits (the keys met are put in).
    `progress(what)`: a round's progress(done, total), started as its labelling starts."""
    out = Grown(train)
    for r, count in enumerate(values["search_children"]):
        t0 = time.monotonic()
        cols = out.train.select(["planes", "side_to_move", "castling", "ep_square"]).to_pydict()
        fens = fens_from_columns(cols["planes"], cols["side_to_move"], cols["castling"], cols["ep_square"])
        boards = children(fens, count, values["search_seed"] + r, held_out)
        t1 = time.monotonic()
        cp, why = label(boards, pool, progress(f"round {r + 1}'s children labelled") if progress else None)
        ok = np.isfinite(cp)
        if len(boards) and not ok.any():
            raise EngineError(
                f"{pool.name} ({pool.path}) gave no static evaluation for any of round {r + 1}'s {len(boards):,} "
                f"children, the first: {why}"
            )
        new = rows_of([b for b, k in zip(boards, ok, strict=True) if k], cp[ok], values, out.train.schema)
        out.train = pa.concat_tables([out.train, new])
        out.added.append(len(new))
        out.unlabelled += int((~ok).sum())
        log(
            f"round {r + 1}: {len(boards):,} new positions from {len(fens):,} train rows ({count} children each, "
            f"{t1 - t0:.0f} s), labelled by {pool.name} in {time.monotonic() - t1:.0f} s"
            + (f"; {int((~ok).sum()):,} left out without an evaluation, the first: {why}" if not ok.all() else "")
        )
    return out
