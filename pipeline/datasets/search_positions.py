"""Positions of the kind a search scores, for a set's train split (the datasets
`sabatelli_regression_search` and `sabatelli_3class_search`, pipeline.datasets.datasets).

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
- met for the first time (in the rows' order).

The drawing runs in as many processes as the run has engines (python-chess picks and plays the
moves; numpy encodes and keys the children kept, as ingest does), and gives the same children
in the same order for any number of them.

Each child is labelled by Stockfish's `eval` through the run's engine pool (pipeline.labels.pool,
with its retries and checks), from a FEN with halfmove clock 0, as `chess-pipeline label
--static` labels every position (Stockfish scales its evaluation down as the fifty-move count
grows): the number a label would hold. A child the engine gives no evaluation (after the pool's
retries) is left out and counted. Its row has the dataset's columns: the position's, the
label's, the target (a class set's by its class macro, as its SQL makes it; the regression set's
both targets: the linear map of the centipawns clipped at `clip_cp`, and the win probability)
from the side to move's view or White's as `pov` says, and `mirrored`; the game's columns are null.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import chess
import numpy as np
import pyarrow as pa

from pipeline.ingest.encoding import fens_from_columns, pack_planes
from pipeline.ingest.replay import RECORD_FIELDS, State, encode_records
from pipeline.labels.engine import EngineError
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Evaluation, Failure, Job, Limit
from pipeline.parallel import ordered_map, task_seed

PROGRESS_EVERY = 4096
"""Children labelled between two progress reports."""

DRAW_ROWS = 16384
"""Train rows a drawing task takes (a process draws their children)."""


@dataclass
class Children:
    """Positions in the store's encoding, one a row: the children a round drew."""

    planes: np.ndarray
    """(n, 96) uint8, as ingest packs them."""
    white: np.ndarray
    """(n,) bool: White to move."""
    castling: np.ndarray
    """(n,) uint8 castling bits (K=1 Q=2 k=4 q=8)."""
    ep: np.ndarray
    """(n,) int8 en passant square, -1 for none: only where a pawn of the side to move could
    take there (encoding.polyglot_ep, the store's rule)."""
    keys: np.ndarray
    """(n,) uint64 position keys (polyglot Zobrist, encoding.zobrist)."""

    @classmethod
    def of(cls, boards: Sequence[chess.Board]) -> Children:
        """The boards' positions (their clocks are not kept: a child's are 0 and 1)."""
        return _encode([State.from_board(b).record(False) for b in boards], [b.turn for b in boards])

    def __len__(self) -> int:
        return len(self.keys)

    def take(self, rows: np.ndarray) -> Children:
        return Children(*(a[rows] for a in (self.planes, self.white, self.castling, self.ep, self.keys)))

    @classmethod
    def concat(cls, parts: Sequence[Children]) -> Children:
        if not parts:
            return _encode([], [])
        return Children(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in ("planes", "white", "castling", "ep", "keys"))
        )

    def fens(self) -> list[str]:
        """Each position's FEN with halfmove clock 0 and fullmove number 1, the string `label
        --static` gives the engine for a stored position (module docstring)."""
        return fens_from_columns(
            [p.tobytes() for p in self.planes],
            np.where(self.white, "w", "b").tolist(),
            self.castling.tolist(),
            [None if e < 0 else e for e in self.ep.tolist()],
        )


def _encode(records: list[tuple], white_to_move: list[bool]) -> Children:
    """Positions from their replay records (pipeline.ingest.replay.State.record) and sides to move, in
    the store's encoding (replay.encode_records, as ingest's)."""
    rec = np.array(records, dtype=np.uint64).reshape(-1, RECORD_FIELDS)
    white = np.array(white_to_move, dtype=bool)
    planes, castling, ep, keys = encode_records(rec, white)
    return Children(pack_planes(planes), white, castling, ep, keys)


def _draw(task: tuple[Sequence[str], int, int, int], _state: None) -> Children:
    """An ordered_map task: `count` random children of each position (FENs, the first the
    train split's row `first`), those not over and not in check, in the rows' order."""
    fens, count, seed, first = task
    records, turns = [], []
    for row, fen in enumerate(fens, first):
        board = chess.Board(fen)
        moves = list(board.legal_moves)
        for move in random.Random(task_seed(seed, row)).sample(moves, min(count, len(moves))):
            board.push(move)
            if not board.is_check() and not board.is_game_over(claim_draw=False):
                records.append(State.from_board(board).record(False))
                turns.append(board.turn)
            board.pop()
    return _encode(records, turns)


def children(
    fens: Sequence[str],
    count: int,
    seed: int,
    held_out: set[int],
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Children:
    """`count` random children of each position (fewer where it has fewer moves; row r's drawn
    with task_seed(seed, r)), those not over, not in check and not held out; each position once,
    where it is first met in the rows' order. The keys of the children kept are added to
    `held_out`. The drawing runs in `workers` processes (0: one per usable core), DRAW_ROWS rows
    a task, and gives the same children in the same order for any number of them;
    progress(rows drawn from, rows)."""
    tasks = [(fens[i : i + DRAW_ROWS], count, seed, i) for i in range(0, len(fens), DRAW_ROWS)]
    drawn = Children.concat(
        ordered_map(
            _draw,
            tasks,
            workers,
            progress=progress and (lambda done, total: progress(min(done * DRAW_ROWS, len(fens)), len(fens))),
        )
    )
    keep = np.zeros(len(drawn), dtype=bool)
    for i, key in enumerate(drawn.keys.tolist()):  # first met, in the rows' order
        if key not in held_out:
            held_out.add(key)
            keep[i] = True
    return drawn.take(keep)


def label(
    positions: Children, pool: EnginePool, progress: Callable[[int, int], None] | None = None
) -> tuple[np.ndarray, str]:
    """Stockfish's static evaluation of each position (White's centipawns; NaN where the engine
    gave none after the pool's retries), by the run's engines as `label --static` labels, and
    the first failure met ('' when every position has one); progress(done, positions)."""
    n = len(positions)
    cp, why = np.full(n, np.nan), ""
    jobs = (Job(i, fen, bool(w)) for i, (fen, w) in enumerate(zip(positions.fens(), positions.white, strict=True)))
    for done, r in enumerate(pool.run(jobs, Limit("static")), 1):
        if isinstance(r, Evaluation) and r.cp is not None:
            cp[r.job.id] = r.cp
        elif not why:
            why = r.reason if isinstance(r, Failure) else "no centipawn figure"
        if progress and (done % PROGRESS_EVERY == 0 or done == n):
            progress(done, n)
    return cp, why


def rows_of(
    positions: Children,
    white_cp: np.ndarray,
    values: dict,
    schema: pa.Schema,
    classify: Callable[[np.ndarray], np.ndarray] | None = None,
) -> pa.Table:
    """The new rows in the train file's schema: the position (its key, planes, side to move,
    castling, en passant, clocks 0 and 1), the label (White's centipawns, the row's score and the
    target) and the `mirrored` flag; the game's columns null. The score and targets take the
    dataset's `pov`. The target: `classify(score)` for a class set; for the regression set both
    targets, `target` the one `target_kind` names."""
    n, white = len(positions), positions.white
    mirrored = ~white if values["pov"] == "side_to_move" else np.zeros(n, dtype=bool)
    score = np.where(mirrored, -white_cp, white_cp)  # the row's view
    if classify is None:
        clip_cp = float(values["clip_cp"])
        linear = (np.clip(score, -clip_cp, clip_cp) + clip_cp) / (2.0 * clip_cp)
        win_prob = 1.0 / (1.0 + 10.0 ** (-score / float(values["wp_scale"])))
        target = win_prob if values["target_kind"] == "win_prob" else linear
        regression = {"win_prob": pa.array(win_prob), "linear": pa.array(linear)}
    else:
        target, regression = classify(score.astype(np.int32)), {}
    columns = {
        "planes": pa.array([p.tobytes() for p in positions.planes], type=pa.binary(96)),
        "side_to_move": pa.array(np.where(white, "w", "b").tolist()),
        "castling": pa.array(positions.castling, type=pa.uint8()),
        "position_key": pa.array(positions.keys),
        "ep_square": pa.array(positions.ep, mask=positions.ep < 0, type=pa.int8()),
        "halfmove_clock": pa.array(np.zeros(n, dtype=np.uint32)),
        "fullmove_number": pa.array(np.ones(n, dtype=np.uint32)),
        "cp_white": pa.array(white_cp.astype(np.int32)),
        "score_white": pa.array(white_cp.astype(np.int32)),
        "score": pa.array(score.astype(np.int32)),
        "mirrored": pa.array(mirrored),
        **regression,
        "target": pa.array(target),
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
    classify: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Grown:
    """`train` (the dataset's train rows, in its file's columns) grown by the rounds of
    `search_children` (module docstring), round r's moves drawn with seed `search_seed` + r.
    `held_out`: every position key of the dataset's splits (the keys met are put in).
    `progress(what)`: a round's progress(done, total), started as its drawing starts (parent rows
    drawn from) and as its labelling starts (children labelled). The children are drawn in as many
    processes as the pool has engines. `classify(score)`: a class set's targets (rows_of)."""
    out = Grown(train)
    for r, count in enumerate(values["search_children"]):
        t0 = time.monotonic()
        cols = out.train.select(["planes", "side_to_move", "castling", "ep_square"]).to_pydict()
        fens = fens_from_columns(cols["planes"], cols["side_to_move"], cols["castling"], cols["ep_square"])
        drawn = progress(f"round {r + 1}'s parent rows") if progress else None
        found = children(fens, count, values["search_seed"] + r, held_out, pool.workers, drawn)
        t1 = time.monotonic()
        cp, why = label(found, pool, progress(f"round {r + 1}'s children labelled") if progress else None)
        ok = np.isfinite(cp)
        if len(found) and not ok.any():
            raise EngineError(
                f"{pool.name} ({pool.path}) gave no static evaluation for any of round {r + 1}'s {len(found):,} "
                f"children, the first: {why}"
            )
        new = rows_of(found.take(ok), cp[ok], values, out.train.schema, classify)
        out.train = pa.concat_tables([out.train, new])
        out.added.append(len(new))
        out.unlabelled += int((~ok).sum())
        log(
            f"round {r + 1}: {len(found):,} new positions from {len(fens):,} train rows ({count} "
            f"{'child' if count == 1 else 'children'} each, "
            f"drawn in {t1 - t0:.0f} s), labelled by {pool.name} in {time.monotonic() - t1:.0f} s"
            + (f"; {int((~ok).sum()):,} left out without an evaluation, the first: {why}" if not ok.all() else "")
        )
    return out
