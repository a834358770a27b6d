"""Playing with an evaluator: a negamax alpha-beta search, the evaluators it takes, and players.

An evaluator scores positions that are not over, from the side to move's point of view, in
centipawn-like units (only their order matters to the search); `evaluate` takes a batch, so a
network scores every child of a frontier node in one call. The search handles every
game-ending position itself: checkmate, stalemate, insufficient material, the fifty-move
rule and repetition (a position met again on the search path or earlier in the game since
the last irreversible move counts as a draw, as engines do).

    search = AlphaBeta(MaterialEvaluator(), depth=3)
    result = search.search(board)        # SearchResult(move, score, depth, nodes)

The 1-ply player of the published work (score every legal move's resulting position, play the
best) is `AlphaBeta(evaluator, depth=1)`: one batch of children, no search below.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import chess
import chess.engine
import numpy as np

from pipeline.ingest.encoding import castling_bits, pack_planes

MATE = 100_000
"""Score of delivering mate now; a mate n plies away scores MATE - n."""
MATE_BOUND = MATE - 1_000
"""Scores beyond this are mates."""
EVAL_CLIP = 30_000
"""Evaluator scores are clipped to this, far from the mate scores."""

EXACT, LOWER, UPPER = 0, 1, 2


class Evaluator(Protocol):
    name: str

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        """Scores of positions that are not over, side to move's point of view."""
        ...


def board_arrays(boards: Sequence[chess.Board]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The store's encoding of boards (as ingest writes it): planes (N, 96) uint8, White to move
    (N,) bool, castling bits (N,) uint8 (K=1 Q=2 k=4 q=8)."""
    rights = np.fromiter((b.castling_rights for b in boards), dtype=np.uint64, count=len(boards))
    return _packed_planes(boards), white_to_move(boards), castling_bits(rights)


def _piece_boards(board: chess.Board) -> tuple[int, ...]:
    """The 12 piece bitboards of a board in the store's plane order (P N B R Q K p n b r q k)."""
    black, white = board.occupied_co
    p, n, b, r, q, k = board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings
    return (
        p & white,
        n & white,
        b & white,
        r & white,
        q & white,
        k & white,
        p & black,
        n & black,
        b & black,
        r & black,
        q & black,
        k & black,
    )


def board_bits(boards: Sequence[chess.Board]) -> np.ndarray:
    """(N, 768) uint8 piece bits, feature plane * 64 + square (a1 = 0), the store's planes
    unpacked: what the evaluators read, straight from python-chess's bitboards. A search calls
    its evaluator with one board a capture node, where building the store's encoding (castling
    bits too, planes split by colour in numpy) cost more than the evaluation itself."""
    return np.unpackbits(_packed_planes(boards), axis=1, bitorder="little")


def _packed_planes(boards: Sequence[chess.Board]) -> np.ndarray:
    """(N, 96) uint8: the store's planes column (pack_planes) of the boards' piece bitboards."""
    return pack_planes(np.array([_piece_boards(b) for b in boards], dtype=np.uint64).reshape(-1, 12))


def white_to_move(boards: Sequence[chess.Board]) -> np.ndarray:
    """(N,) bool: whether White is to move on each board."""
    return np.fromiter((b.turn for b in boards), dtype=bool, count=len(boards))


# Simplified Evaluation Function (Tomasz Michniewski): material and piece-square tables, from
# White's point of view with a1 = 0; tables are written rank 8 first, as printed.
_VALUES = {chess.PAWN: 100, chess.KNIGHT: 320, chess.BISHOP: 330, chess.ROOK: 500, chess.QUEEN: 900, chess.KING: 0}
# One printed rank a line (the formatter leaves the tables so).
# fmt: off
_PST_PRINTED = {
    chess.PAWN: [
          0,   0,   0,   0,   0,   0,   0,   0,
         50,  50,  50,  50,  50,  50,  50,  50,
         10,  10,  20,  30,  30,  20,  10,  10,
          5,   5,  10,  25,  25,  10,   5,   5,
          0,   0,   0,  20,  20,   0,   0,   0,
          5,  -5, -10,   0,   0, -10,  -5,   5,
          5,  10,  10, -20, -20,  10,  10,   5,
          0,   0,   0,   0,   0,   0,   0,   0,
    ],
    chess.KNIGHT: [
        -50, -40, -30, -30, -30, -30, -40, -50,
        -40, -20,   0,   0,   0,   0, -20, -40,
        -30,   0,  10,  15,  15,  10,   0, -30,
        -30,   5,  15,  20,  20,  15,   5, -30,
        -30,   0,  15,  20,  20,  15,   0, -30,
        -30,   5,  10,  15,  15,  10,   5, -30,
        -40, -20,   0,   5,   5,   0, -20, -40,
        -50, -40, -30, -30, -30, -30, -40, -50,
    ],
    chess.BISHOP: [
        -20, -10, -10, -10, -10, -10, -10, -20,
        -10,   0,   0,   0,   0,   0,   0, -10,
        -10,   0,   5,  10,  10,   5,   0, -10,
        -10,   5,   5,  10,  10,   5,   5, -10,
        -10,   0,  10,  10,  10,  10,   0, -10,
        -10,  10,  10,  10,  10,  10,  10, -10,
        -10,   5,   0,   0,   0,   0,   5, -10,
        -20, -10, -10, -10, -10, -10, -10, -20,
    ],
    chess.ROOK: [
          0,   0,   0,   0,   0,   0,   0,   0,
          5,  10,  10,  10,  10,  10,  10,   5,
         -5,   0,   0,   0,   0,   0,   0,  -5,
         -5,   0,   0,   0,   0,   0,   0,  -5,
         -5,   0,   0,   0,   0,   0,   0,  -5,
         -5,   0,   0,   0,   0,   0,   0,  -5,
         -5,   0,   0,   0,   0,   0,   0,  -5,
          0,   0,   0,   5,   5,   0,   0,   0,
    ],
    chess.QUEEN: [
        -20, -10, -10,  -5,  -5, -10, -10, -20,
        -10,   0,   0,   0,   0,   0,   0, -10,
        -10,   0,   5,   5,   5,   5,   0, -10,
         -5,   0,   5,   5,   5,   5,   0,  -5,
          0,   0,   5,   5,   5,   5,   0,  -5,
        -10,   5,   5,   5,   5,   5,   0, -10,
        -10,   0,   5,   0,   0,   0,   0, -10,
        -20, -10, -10,  -5,  -5, -10, -10, -20,
    ],
}
_KING_MIDDLE = [
    -30, -40, -40, -50, -50, -40, -40, -30,
    -30, -40, -40, -50, -50, -40, -40, -30,
    -30, -40, -40, -50, -50, -40, -40, -30,
    -30, -40, -40, -50, -50, -40, -40, -30,
    -20, -30, -30, -40, -40, -30, -30, -20,
    -10, -20, -20, -20, -20, -20, -20, -10,
     20,  20,   0,   0,   0,   0,  20,  20,
     20,  30,  10,   0,   0,  10,  30,  20,
]
_KING_END = [
    -50, -40, -30, -20, -20, -30, -40, -50,
    -30, -20, -10,   0,   0, -10, -20, -30,
    -30, -10,  20,  30,  30,  20, -10, -30,
    -30, -10,  30,  40,  40,  30, -10, -30,
    -30, -10,  30,  40,  40,  30, -10, -30,
    -30, -10,  20,  30,  30,  20, -10, -30,
    -30, -30,   0,   0,   0,   0, -30, -30,
    -50, -30, -30, -30, -30, -30, -30, -50,
]
# fmt: on


def _white_table(printed: list[int]) -> np.ndarray:
    """Printed rank 8 first -> indexed by square (a1 = 0) for White."""
    return np.array(printed, dtype=np.float32).reshape(8, 8)[::-1].reshape(64)


def _weights(king: list[int]) -> np.ndarray:
    w = np.zeros((12, 64), dtype=np.float32)
    for pt in chess.PIECE_TYPES:
        table = _white_table(king if pt == chess.KING else _PST_PRINTED[pt]) + _VALUES[pt]
        w[pt - 1] = table
        w[6 + pt - 1] = -table.reshape(8, 8)[::-1].reshape(64)  # Black: mirrored ranks, negated
    return w.reshape(768)


_W_MIDDLE, _W_END = _weights(_KING_MIDDLE), _weights(_KING_END)
PHASE_UNITS = np.array([0, 1, 1, 2, 4, 0] * 2, dtype=np.float32)  # per plane: N B 1, R 2, Q 4
"""Phase units of a piece on each of the 12 planes: the middlegame's share is their sum (at most
24, the start's) / 24."""


TRADITIONAL_TABLES = (_W_MIDDLE, _W_END)
"""The traditional evaluation's middlegame and endgame weights, (768,) each: centipawns of a
piece (plane P N B R Q K p n b r q k) on a square (a1 = 0), from White's point of view."""


class MaterialEvaluator:
    """The traditional evaluation: material plus piece-square tables (Michniewski's Simplified
    Evaluation Function), the king's table tapered from middlegame to endgame by the non-pawn
    material left (24 phase units at the start). Other tables of the same form (`middle`, `end`:
    (768,) weights as TRADITIONAL_TABLES) make another evaluation at the same cost
    (scripts/quiet_study.py plays learnt ones)."""

    name = "material_pst"

    def __init__(self, middle: np.ndarray | None = None, end: np.ndarray | None = None, name: str = ""):
        self.middle = _W_MIDDLE if middle is None else np.asarray(middle, dtype=np.float32).reshape(768)
        self.end = _W_END if end is None else np.asarray(end, dtype=np.float32).reshape(768)
        if name:
            self.name = name

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        return self.score_bits(board_bits(boards), white_to_move(boards))

    def score_bits(self, bits: np.ndarray, white: np.ndarray) -> np.ndarray:
        """Scores (side to move's view) of piece bits (N, 768) (board_bits) and White to move (N,)."""
        bits = bits.astype(np.float32)
        phase = np.minimum(bits.reshape(-1, 12, 64).sum(2) @ PHASE_UNITS, 24.0) / 24.0
        score = phase * (bits @ self.middle) + (1.0 - phase) * (bits @ self.end)
        return np.where(white, score, -score)


def _game_over_score(board: chess.Board, ply: int) -> float | None:
    """The score of a position the rules end (side to move's view), else None. Mate comes
    first: a mate on the hundredth half-move stands."""
    if not any(board.generate_legal_moves()):
        return -(MATE - ply) if board.is_check() else 0.0
    if board.is_insufficient_material() or board.halfmove_clock >= 100:
        return 0.0
    return None


@dataclass
class SearchResult:
    move: chess.Move | None
    score: float
    """Side to move's view; beyond MATE_BOUND a mate (MATE - plies)."""
    depth: int
    nodes: int
    pv: list[chess.Move] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def mate_in(self) -> int | None:
        """Moves to mate (negative: being mated), when the score is a mate."""
        if abs(self.score) < MATE_BOUND:
            return None
        plies = MATE - abs(self.score)
        return int((plies + 1) // 2) * (1 if self.score > 0 else -1)


class _Timeout(Exception):
    pass


class AlphaBeta:
    """Negamax alpha-beta at a fixed depth, or a time or node budget per move (iterative
    deepening up to max_depth), with a transposition table and move ordering: the table's move
    first, then the rest by the evaluator's score of the position each leads to (one batch per
    interior node). A node budget is the reproducible form of a time budget: the same position,
    evaluator and budget always give the same search, whatever else loads the machine.

    Frontier nodes (depth 1) score all their children in one evaluator call, which is what
    makes a network fast enough to search with.

    `quiescence` (plies, 0: none) resolves captures beyond the frontier: a child reached by a
    capture is scored by a search of captures only (the side to move may stand on the
    evaluator's score of the position or capture, most valuable victim first, least valuable
    attacker next; in check it may not stand, and every evasion is searched while plies
    remain), so a leaf in the middle of an exchange is not taken at its face value. Its nodes
    count towards a node or time budget, except that depth 1 always finishes, its capture search
    included (as without one, the first iteration is never cut). It costs one evaluator call a
    node, not a batch.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        depth: int | None = None,
        movetime: float | None = None,
        max_depth: int = 64,
        tt_entries: int = 1 << 20,
        nodes: int | None = None,
        quiescence: int = 0,
    ):
        if sum(x is not None for x in (depth, movetime, nodes)) != 1:
            raise ValueError("give exactly one of depth (plies), movetime (seconds) or nodes")
        if depth is not None and depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        if nodes is not None and nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        if quiescence < 0:
            raise ValueError(f"quiescence is 0 (none) or plies of captures, got {quiescence}")
        self.evaluator = evaluator
        self.depth = depth
        self.movetime = movetime
        self.max_nodes = nodes
        self.quiescence = quiescence
        self.max_depth = depth if depth is not None else max_depth
        self.tt_entries = tt_entries
        self.tt: dict = {}
        self.nodes = 0
        self._deadline = float("inf")
        self._node_limit = float("inf")
        self._finishing = False
        self._seen: dict = {}

    @property
    def name(self) -> str:
        if self.depth is not None:
            limit = f"depth {self.depth}"
        elif self.max_nodes is not None:
            limit = f"{self.max_nodes} nodes/move" + (f" depth <= {self.max_depth}" if self.max_depth < 64 else "")
        else:
            limit = f"{self.movetime:g}s/move"
        if self.quiescence:
            limit += f" + {self.quiescence} plies of captures"
        return f"{self.evaluator.name} alpha-beta {limit}"

    def search(self, board: chess.Board) -> SearchResult:
        """The best move of a position that is not over, and its score."""
        start = time.monotonic()
        root = board.copy()
        if not any(root.generate_legal_moves()):
            raise ValueError(f"no legal moves in {root.fen()}")
        self.nodes = 0
        if len(self.tt) > self.tt_entries:
            self.tt.clear()
        self._seen = _history_keys(root)
        self._deadline = start + self.movetime if self.movetime is not None else float("inf")
        self._node_limit = self.max_nodes if self.max_nodes is not None else float("inf")
        best = None
        for depth in range(1, self.max_depth + 1):
            self._finishing = depth == 1  # depth 1 always finishes, its capture search included
            try:
                score = self._negamax(root, depth, -MATE - 1, MATE + 1, 0)
            except _Timeout:
                break
            move = self._tt_move(root)
            best = SearchResult(move, score, depth, self.nodes, self._pv(root, depth), time.monotonic() - start)
            if abs(score) >= MATE_BOUND:  # a forced mate either way: deeper search changes nothing
                break
            if self.movetime is not None and time.monotonic() - start > self.movetime / 2:
                break  # the next iteration would not finish
            if self.nodes > self._node_limit / 2:
                break  # nor with half the node budget spent
        if best is None:  # not even depth 1 in time: play the first legal move the ordering prefers
            move = self._ordered(root, list(root.legal_moves), None)[0]
            best = SearchResult(move, 0.0, 0, self.nodes, [move], time.monotonic() - start)
        best.nodes = self.nodes
        return best

    def _tt_move(self, board: chess.Board) -> chess.Move | None:
        entry = self.tt.get(board._transposition_key())
        return entry[3] if entry else None

    def _pv(self, board: chess.Board, depth: int) -> list[chess.Move]:
        b, pv = board.copy(), []
        for _ in range(depth):
            move = self._tt_move(b)
            if move is None or not b.is_legal(move):
                break
            pv.append(move)
            b.push(move)
        return pv

    def _scored_children(
        self, board: chess.Board, moves: list[chess.Move], ply: int, frontier: bool
    ) -> tuple[np.ndarray, list[int]]:
        """Each move's score for the side making it, and the moves the evaluator scored: children
        the rules end by the rules (mates first), the rest in one evaluator batch. At the frontier
        the children are search nodes: they are counted, and one repeating an earlier position is
        a draw."""
        scores = np.empty(len(moves))
        pending, boards = [], []
        for i, move in enumerate(moves):
            board.push(move)
            if frontier:
                self.nodes += 1
            if frontier and self._seen.get(board._transposition_key(), 0):
                scores[i] = 0.0
            else:
                over = _game_over_score(board, ply + 1)
                if over is not None:
                    scores[i] = -over
                else:
                    pending.append(i)
                    boards.append(board.copy(stack=False))
            board.pop()
        if boards:
            scores[pending] = -self._evaluate(boards)
        return scores, pending

    def _evaluate(self, boards: list[chess.Board]) -> np.ndarray:
        """The evaluator's scores (side to move's view), clipped below the mate scores."""
        return np.clip(np.asarray(self.evaluator.evaluate(boards), dtype=np.float64), -EVAL_CLIP, EVAL_CLIP)

    def _ordered(self, board: chess.Board, moves: list[chess.Move], first: chess.Move | None) -> list[chess.Move]:
        score, _ = self._scored_children(board, moves, 0, frontier=False)
        order = sorted(range(len(moves)), key=lambda i: -score[i])
        out = [moves[i] for i in order]
        if first is not None and first in out:
            out.remove(first)
            out.insert(0, first)
        return out

    def _count_node(self) -> None:
        """One more node; past the budget, the iteration ends (_Timeout), but never the first: depth
        1 always finishes, its capture search included."""
        self.nodes += 1
        if self._finishing:
            return
        if self.nodes > self._node_limit or (self.nodes & 255 == 0 and time.monotonic() > self._deadline):
            raise _Timeout

    def _negamax(self, board: chess.Board, depth: int, alpha: float, beta: float, ply: int) -> float:
        self._count_node()
        key = board._transposition_key()  # python-chess's own hashable position key (no clocks)
        if ply and self._seen.get(key, 0):
            return 0.0  # a repetition: a draw by the rules' spirit, as engines score it
        over = _game_over_score(board, ply)
        if over is not None:
            return over
        alpha0 = alpha
        entry = self.tt.get(key)
        tt_move = None
        if entry is not None:
            e_depth, e_score, e_flag, tt_move = entry
            if ply and e_depth >= depth:
                s = _from_tt(e_score, ply)
                if e_flag == EXACT or (e_flag == LOWER and s >= beta) or (e_flag == UPPER and s <= alpha):
                    return s
        moves = list(board.legal_moves)
        self._seen[key] = self._seen.get(key, 0) + 1
        try:
            if depth == 1:
                best, best_move = self._frontier(board, moves, ply)
            else:
                best, best_move = -MATE - 1, None
                for move in self._ordered(board, moves, tt_move):
                    board.push(move)
                    try:
                        score = -self._negamax(board, depth - 1, -beta, -alpha, ply + 1)
                    finally:
                        board.pop()
                    if score > best:
                        best, best_move = score, move
                    alpha = max(alpha, score)
                    if alpha >= beta:
                        break
        finally:
            self._seen[key] -= 1
        flag = UPPER if best <= alpha0 else LOWER if best >= beta else EXACT
        self.tt[key] = (depth, _to_tt(best, ply), flag, best_move)
        return best

    def _frontier(self, board: chess.Board, moves: list[chess.Move], ply: int) -> tuple[float, chess.Move]:
        """Every child scored at once: game-ending ones by the rules, the rest in one batch; with
        `quiescence`, each capture's score then resolved by a capture search, bounded by the best
        move found so far (captures last, so the quiet moves set that bound)."""
        scores, evaluated = self._scored_children(board, moves, ply, frontier=True)
        if not self.quiescence:
            i = int(np.argmax(scores))
            return float(scores[i]), moves[i]
        captures = [i for i in evaluated if board.is_capture(moves[i])]
        resolved = set(captures)
        others = [i for i in range(len(moves)) if i not in resolved]
        top = max(others, key=lambda i: scores[i], default=None)  # the first of the best
        best = scores[top] if top is not None else -MATE - 1
        for i in captures:
            board.push(moves[i])
            try:
                score = -self._capture_search(board, -MATE - 1, -best, ply + 1, self.quiescence, -scores[i])
            finally:
                board.pop()
            # only a strictly better capture: one that fails low at the bound scores it, not its value
            if top is None or score > best:
                top, best = i, score
        return float(best), moves[top]

    def _capture_search(
        self, board: chess.Board, alpha: float, beta: float, ply: int, plies: int, stand: float
    ) -> float:
        """A position's score resolved by captures, side to move's view (fail-soft: at least beta
        means at least that, at most alpha at most that); `stand` is the evaluator's score of the
        position, which is not counted again as a node. In check there is no standing: every
        evasion is searched on (with plies left; else the position stands). Its nodes are
        counted; a spent budget stops it, but not in the first iteration (depth 1 finishes)."""
        in_check = board.is_check()
        if plies == 0 or (stand >= beta and not in_check):
            return stand
        if in_check:
            best, moves = -MATE - 1, list(board.legal_moves)
        else:
            best, alpha = stand, max(alpha, stand)
            moves = sorted(
                board.generate_legal_captures(),
                key=lambda m: (-_victim(board, m), board.piece_type_at(m.from_square)),
            )
        for move in moves:
            board.push(move)
            try:
                self._count_node()
                over = _game_over_score(board, ply + 1)
                if over is not None:
                    score = -over
                else:
                    # a position in check with plies left does not stand: its score is not needed
                    child = 0.0 if plies > 1 and board.is_check() else float(self._evaluate([board])[0])
                    score = -self._capture_search(board, -beta, -alpha, ply + 1, plies - 1, child)
            finally:
                board.pop()
            if score > best:
                best = score
                if score >= beta:
                    break
                alpha = max(alpha, score)
        return best


def _victim(board: chess.Board, move: chess.Move) -> chess.PieceType:
    """The piece a capture takes (an en passant capture takes a pawn); python-chess numbers the
    piece types from pawn (1) to king (6), the order most valuable victim first sorts by."""
    return board.piece_type_at(move.to_square) or chess.PAWN


def _to_tt(score: float, ply: int) -> float:
    """Mate scores stored relative to the node, not the root."""
    if score >= MATE_BOUND:
        return score + ply
    if score <= -MATE_BOUND:
        return score - ply
    return score


def _from_tt(score: float, ply: int) -> float:
    if score >= MATE_BOUND:
        return score - ply
    if score <= -MATE_BOUND:
        return score + ply
    return score


def _history_keys(board: chess.Board) -> dict:
    """Positions of the game since the last irreversible move (the root excluded), counted."""
    seen: dict = {}
    b = board.copy()
    for _ in range(min(board.halfmove_clock, len(board.move_stack))):
        b.pop()
        key = b._transposition_key()
        seen[key] = seen.get(key, 0) + 1
    return seen


class Player(Protocol):
    name: str

    def choose(self, board: chess.Board) -> chess.Move: ...

    def close(self) -> None: ...


class SearchPlayer:
    """Plays the move an AlphaBeta search finds."""

    def __init__(self, search: AlphaBeta, name: str | None = None):
        self.search = search
        self.name = name or search.name

    def choose(self, board: chess.Board) -> chess.Move:
        return self.search.search(board).move

    def close(self) -> None:
        pass


class RandomPlayer:
    """A uniformly random legal move (seeded)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)

    def seed_game(self, *game: object) -> None:
        """Moves of their own for one game of a match (its place in the match: match, opening,
        colour), from this player's seed: the same whichever process plays that game."""
        from pipeline.parallel import task_seed

        self.rng.seed(task_seed("random mover", self.seed, *game))

    def choose(self, board: chess.Board) -> chess.Move:
        return self.rng.choice(list(board.legal_moves))

    def close(self) -> None:
        pass


class StockfishPlayer:
    """Stockfish at a UCI Skill Level (0-20) with a depth, node or time limit per move."""

    def __init__(
        self,
        path: str,
        skill: int = 20,
        depth: int | None = None,
        nodes: int | None = None,
        movetime: float | None = None,
        threads: int = 1,
        hash_mb: int = 16,
    ):
        if not 0 <= skill <= 20:
            raise ValueError(f"Skill Level is 0..20, got {skill}")
        if depth is None and nodes is None and movetime is None:
            raise ValueError("give a depth, nodes or movetime limit")
        self.limit = chess.engine.Limit(depth=depth, nodes=nodes, time=movetime)
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.engine.configure({"Skill Level": skill, "Threads": threads, "Hash": hash_mb})
        self.skill = skill
        limit = f"depth {depth}" if depth else f"nodes {nodes}" if nodes else f"{movetime:g}s/move"
        self.name = f"stockfish skill {skill} {limit}"
        self._game = 0

    def new_game(self) -> None:
        self._game += 1

    def choose(self, board: chess.Board) -> chess.Move:
        return self.engine.play(board, self.limit, game=self._game).move

    def close(self) -> None:
        self.engine.quit()
