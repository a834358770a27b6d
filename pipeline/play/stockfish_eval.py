"""Stockfish's own static evaluation as a search's evaluator (pipeline.play.search.Evaluator).

Stockfish 15.1's `eval` command prints the evaluation its search calls at a leaf (NNUE blended
with the classical term, "Final evaluation", in pawns, White's view): a far better evaluation
than material and piece-square tables, and a slower one here, since every position goes to the
engine process over a pipe and comes back with the whole evaluation trace. Lubeck's grid plays
it against the traditional evaluation as the reference of a better but slower evaluation
(GridConfig.challenger), so the grid shows where such an evaluation stops paying for itself.

A position in check has no static evaluation in Stockfish (`Final evaluation: none (in
check)`). The search asks for one for a checking move at its frontier and in its move ordering
(the capture search answers a check itself while it has plies left): 1-4% of its calls in
probes. For those this evaluator takes Stockfish's depth-1 search instead, its hash and
history cleared first so the figure depends on the position alone: the same units as `eval`
(Stockfish prints both as centipawns of its own pawn), where the traditional evaluation's
centipawns would be another scale in the same batch. It counts them (`in_check`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import chess
import numpy as np

from pipeline.labels.engine import EngineError, UciEngine
from pipeline.labels.uci import final_evaluation_pawns, find_stockfish, parse_info
from pipeline.play.search import EVAL_CLIP

EVAL_TIMEOUT_S = 30.0
"""The longest one batch's evaluations (or one search in check) may take before the engine
counts as hung."""
BATCH = 32
"""Positions sent at once: their commands (at most about 110 bytes each) fit in one page, the
smallest buffer a pipe gets, so writing them never waits on the engine, which may itself be
waiting for us to read its traces (about 4 KB a position)."""


class StockfishStaticEvaluator:
    """Scores from Stockfish's `eval` (side to move's view, centipawns), one engine process
    (one thread) per evaluator; its depth-1 search for a position in check."""

    name = "stockfish_static"

    def __init__(self, binary: str | None = None):
        self.engine = UciEngine(find_stockfish(binary)).start()
        self.in_check = 0
        """Positions in check, answered by Stockfish's depth-1 search."""
        self.evaluated = 0
        """Positions answered by Stockfish's `eval`."""

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        out = np.zeros(len(boards), dtype=np.float32)
        asked = []
        for i, b in enumerate(boards):
            if b.is_check():
                out[i] = self._searched_cp(b)
                self.in_check += 1
            else:
                asked.append(i)
        for at in range(0, len(asked), BATCH):
            part = asked[at : at + BATCH]
            white = self._white_cp([boards[i] for i in part])
            out[part] = [w if boards[i].turn == chess.WHITE else -w for i, w in zip(part, white)]
        self.evaluated += len(asked)
        return out

    def _white_cp(self, boards: Sequence[chess.Board]) -> list[float]:
        self.engine.send(b"".join(f"position fen {b.fen()}\neval\n".encode() for b in boards) + b"isready\n")
        lines = [
            line for line in self.engine.lines_until(b"readyok", EVAL_TIMEOUT_S) if line.startswith(b"Final evaluation")
        ]
        if len(lines) != len(boards):
            raise EngineError(f"{len(lines)} evaluations from Stockfish for {len(boards)} positions")
        white = []
        for line in lines:
            try:
                white.append(final_evaluation_pawns(line) * 100.0)
            except (IndexError, ValueError):
                text = line.decode(errors="replace")
                raise EngineError(f"Stockfish's evaluation is not a number: {text!r}") from None
        return white

    def _searched_cp(self, board: chess.Board) -> float:
        """Side to move's centipawns from Stockfish's depth-1 search of board (hash and history
        cleared first: `ucinewgame`); a mate it finds is +/-EVAL_CLIP, the most an evaluation
        may say."""
        self.engine.send(f"ucinewgame\nposition fen {board.fen()}\ngo depth 1\n".encode())
        last = None
        for line in self.engine.lines_until(b"bestmove", EVAL_TIMEOUT_S):
            if line.startswith(b"info") and b" score " in line:
                last = line
        if last is None:
            raise EngineError(f"Stockfish's depth-1 search of {board.fen()} gave no score")
        try:
            info = parse_info(last)
        except ValueError as e:  # MalformedOutput
            raise EngineError(str(e)) from None
        if "mate" in info:
            return float(EVAL_CLIP if info["mate"] > 0 else -EVAL_CLIP)
        return float(info["cp"])

    def cpu_seconds(self) -> float:
        """CPU seconds the engine process has used (user + system): its share of a search's cost,
        which this process's own CPU time does not count."""
        with open(f"/proc/{self.engine.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def close(self) -> None:
        self.engine.close()
