"""EPD test suites: loading, the Strategic Test Suite's points, solved counts, Kaufman's delta-cp.

A suite is any .epd file. Positions with `c0`/`c8`/`c9` point lists (the STS format) are
scored with those points; positions with `bm` or `am` count as solved when the move played is
a best move / not an avoid move. Kaufman's test is scored Sabatelli's way as well: the engine
evaluation after the suite's move minus the one after the move played (delta-cp).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import chess

from pipeline.engine import EnginePool, Evaluation, Job, Limit


@dataclass
class EpdPosition:
    suite: str
    index: int
    """0-based position in the file."""
    id: str
    board: chess.Board
    ops: dict = field(default_factory=dict)

    @property
    def best_moves(self) -> list[chess.Move]:
        return list(self.ops.get("bm") or [])

    @property
    def avoid_moves(self) -> list[chess.Move]:
        return list(self.ops.get("am") or [])

    @property
    def points(self) -> dict[chess.Move, int]:
        """STS points per move: c9 (UCI) with c8 (points), else c0 ("SAN=points, ...")."""
        return sts_points(self.board, self.ops)


class SuiteError(ValueError):
    pass


def load_epd(path: Path | str, suite: str | None = None) -> list[EpdPosition]:
    """Every position of an EPD file (blank lines and # comments skipped; CRLF read as LF).
    A line python-chess cannot read raises SuiteError naming the file and line."""
    path = Path(path)
    name = suite or path.name.split(".")[0]
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            board, ops = chess.Board.from_epd(line)
        except ValueError as e:
            raise SuiteError(f"{path}:{lineno}: not an EPD position ({e})") from e
        out.append(EpdPosition(name, len(out), str(ops.get("id", f"{name}.{len(out) + 1}")), board, ops))
    return out


def sts_points(board: chess.Board, ops: dict) -> dict[chess.Move, int]:
    if "c9" in ops and "c8" in ops:
        moves, points = str(ops["c9"]).split(), str(ops["c8"]).split()
        if len(moves) != len(points):
            raise SuiteError(f"{ops.get('id')}: c9 has {len(moves)} moves but c8 {len(points)} points")
        return {chess.Move.from_uci(m): int(p) for m, p in zip(moves, points)}
    if "c0" in ops:
        out = {}
        for item in str(ops["c0"]).split(","):
            san, _, pts = item.strip().partition("=")
            out[board.parse_san(san.strip())] = int(pts)
        return out
    return {}


_STS_ID = re.compile(r"^STS\(v[\d.]+\)\s+(.*)\.(\d+)$")


def sts_theme(position_id: str) -> str:
    """The theme of an STS id ("STS(v1.0) Undermine.001" -> "Undermine"), its '/'-separated
    parts sorted so the suite's one reordered spelling of a theme name joins the others."""
    m = _STS_ID.match(position_id.strip())
    theme = m.group(1) if m else position_id.rsplit(".", 1)[0]
    parts = [p.strip() for p in theme.split("/")]
    return "/".join([parts[0], *sorted(parts[1:])]) if len(parts) > 1 else theme


def is_sts(positions: list[EpdPosition]) -> bool:
    return bool(positions) and all(("c8" in p.ops and "c9" in p.ops) or "c0" in p.ops for p in positions)


def solved(p: EpdPosition, move: chess.Move) -> bool | None:
    """bm: the move is one of them; am: it is none of them; None when the position has neither."""
    if p.best_moves:
        return move in p.best_moves
    if p.avoid_moves:
        return move not in p.avoid_moves
    return None


@dataclass
class SuiteScore:
    positions: int = 0
    points: int = 0
    max_points: int = 0
    solved: int = 0
    scored: int = 0
    """Positions with bm/am (the solved count's denominator)."""
    themes: dict[str, list[int]] = field(default_factory=dict)
    """STS theme -> [points, max points, positions]."""


def score_suite(positions: list[EpdPosition], moves: list[chess.Move]) -> SuiteScore:
    """Points (STS: max 10 a position) and solved count of the moves played."""
    s = SuiteScore()
    for p, move in zip(positions, moves, strict=True):
        s.positions += 1
        pts = p.points
        if pts:
            got, top = pts.get(move, 0), max(pts.values())
            s.points += got
            s.max_points += top
            t = s.themes.setdefault(sts_theme(p.id), [0, 0, 0])
            t[0] += got
            t[1] += top
            t[2] += 1
        ok = solved(p, move)
        if ok is not None:
            s.scored += 1
            s.solved += ok
    return s


@dataclass
class DeltaCp:
    id: str
    move: str
    reference: str
    """The suite's best move, or the engine's own when the position only lists moves to avoid."""
    eval_reference: int
    """Engine score after the reference move, cp for the side that moved (clipped)."""
    eval_move: int
    delta: int
    """eval_reference - eval_move: 0 when the move is the reference or as good."""


def reference_moves(positions: list[EpdPosition], engine_best: dict[int, chess.Move]) -> list[chess.Move]:
    """The suite's (first) best move of each position, else the engine's best move."""
    return [p.best_moves[0] if p.best_moves else engine_best[p.index] for p in positions]


def engine_evaluations(pool: EnginePool, limit: Limit, boards: Iterable[tuple[object, chess.Board]]
                       ) -> dict[object, Evaluation]:
    """Engine evaluations (White's view) of positions, by the caller's id. A position the engine
    fails on raises: a delta-cp with a hole in it would be silently wrong."""
    jobs = [Job(key, b.fen(), b.turn == chess.WHITE) for key, b in boards]
    out = {}
    for r in pool.run(jobs, limit):
        if isinstance(r, Evaluation):
            out[r.job.id] = r
        else:
            raise RuntimeError(f"engine failed on {r.job.fen}: {r.reason}")
    return out


def kaufman_delta_cp(positions: list[EpdPosition], moves: list[chess.Move], pool: EnginePool, limit: Limit,
                     clip: int = 2000) -> list[DeltaCp]:
    """Sabatelli's delta-cp per position: the engine's score (at `limit`) after the suite's move
    minus its score after the move played, both from the mover's side. Positions with only an
    avoid move take the engine's best move (same limit) as the reference."""
    no_bm = [p for p in positions if not p.best_moves]
    best = {}
    if no_bm:
        found = engine_evaluations(pool, limit, ((p.index, p.board) for p in no_bm))
        best = {i: chess.Move.from_uci(e.best_move) for i, e in found.items()}
    refs = reference_moves(positions, best)
    after = {}
    for p, ref, move in zip(positions, refs, moves, strict=True):
        for m in {ref, move}:
            b = p.board.copy()
            b.push(m)
            after[(p.index, m)] = b
    evals = engine_evaluations(pool, limit, after.items())
    out = []
    for p, ref, move in zip(positions, refs, moves):
        white = p.board.turn == chess.WHITE
        e_ref = _after_score(evals[(p.index, ref)], after[(p.index, ref)], white, clip)
        e_move = _after_score(evals[(p.index, move)], after[(p.index, move)], white, clip)
        out.append(DeltaCp(p.id, p.board.san(move), p.board.san(ref), e_ref, e_move, e_ref - e_move))
    return out


def _after_score(e: Evaluation, board: chess.Board, mover_white: bool, clip: int) -> int:
    """The score of the position after a move, from the side that made it, bounded to +/-clip
    cp (engine mate scores are +/-(32000 - plies)) so one missed mate does not swamp an
    average. A checkmated or stalemated position gets no engine search: scored by the rules."""
    if board.is_checkmate():
        return clip
    if board.is_stalemate() or board.is_insufficient_material():
        return 0
    return max(-clip, min(clip, e.score if mover_white else -e.score))
