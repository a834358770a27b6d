"""EPD test suites: loading, the Strategic Test Suite's points, solved counts, Kaufman's delta-cp.

A suite is any .epd file. Positions with STS point lists (`c8` points with `c9` UCI moves, or
`c0 "f5=10, Be5+=2, ..."`) are scored with those points; `c0` is the EPD standard's comment
opcode, so a `c0` of any other shape is kept as the position's comment. Positions with `bm` or
`am` count as solved when the move played is a best move / not an avoid move. Kaufman's test is
scored Sabatelli's way as well (his thesis's definition): per position, the distance between
Stockfish's deep evaluation after the test's move and after the move played, from the mover's side,
a forced mate written as a symbolic 20 pawns (delta-cp); the figure is its mean over the positions
with n and a seeded 95% interval (kaufman_summary), beside Stockfish's own delta as the scale
(kaufman_scale).

Reading a suite never fails on one bad line: a line that is not a playable position (unreadable
EPD, an illegal position, a bm/am or STS move illegal in it, no legal move) is a recorded
failure with its line number and reason, and the other positions load. A file that cannot be
read as text at all (missing, binary, not UTF-8) raises SuiteError naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import chess

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Evaluation, Job, Limit
from pipeline.research.intervals import RESAMPLES, MeanInterval, interval_rows, mean_interval
from pipeline.store.storage_paths import StorePath
from pipeline.store.store_files import read_json, write_json


@dataclass
class EpdPosition:
    suite: str
    index: int
    """0-based among the suite's readable positions."""
    id: str
    board: chess.Board
    ops: dict = field(default_factory=dict)
    line: int = 0
    """1-based line of the file (0: not read from a file)."""

    @property
    def best_moves(self) -> list[chess.Move]:
        return list(self.ops.get("bm") or [])

    @property
    def avoid_moves(self) -> list[chess.Move]:
        return list(self.ops.get("am") or [])

    @cached_property
    def points(self) -> dict[chess.Move, int]:
        """STS points per move: c9 (UCI) with c8 (points), else a c0 of the shape "SAN=points, ..."."""
        return sts_points(self.board, self.ops)

    @property
    def comment(self) -> str | None:
        """The c0 comment, when it is text rather than STS points."""
        c0 = self.ops.get("c0")
        return None if c0 is None or _STS_C0.match(str(c0)) else str(c0)


class SuiteError(ValueError):
    pass


@dataclass
class EpdFailure:
    line: int
    """1-based line of the file."""
    reason: str
    text: str
    """The line (cut to 100 characters)."""


@dataclass
class EpdFile:
    name: str
    path: Path
    positions: list[EpdPosition]
    failures: list[EpdFailure] = field(default_factory=list)

    @property
    def lines(self) -> int:
        """Position lines in the file (blank and # lines left out): positions + failures."""
        return len(self.positions) + len(self.failures)


def _decode(path: Path) -> str:
    """The file's text, or SuiteError saying why it is not an EPD text file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such file (a broken link, or removed while being read)") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: a folder, not an EPD file") from None
    except OSError as e:
        raise SuiteError(f"{path}: cannot be read ({e.strerror or e})") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise SuiteError(f"{path}: UTF-16 text, not an EPD file as the suites are written: save it as UTF-8 or ASCII")
    nul = data.find(b"\0")
    if nul >= 0:
        raise SuiteError(f"{path}: binary data (a NUL byte at offset {nul:,}), not an EPD text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SuiteError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}): save it as UTF-8 or ASCII"
        ) from None


_FULL_FEN = re.compile(r"^(\S+\s+\S+\s+\S+\s+\S+)\s+(\d+)\s+(\d+)(?=\s|;|$)(.*)$", re.S)
"""Four EPD fields followed by FEN's halfmove clock and fullmove number, as some collections write."""


def _epd_text(line: str) -> str:
    m = _FULL_FEN.match(line)
    return f"{m.group(1)} hmvc {m.group(2)}; fmvn {m.group(3)};{m.group(4)}" if m else line


def parse_epd_line(line: str, suite: str, index: int, lineno: int = 0) -> EpdPosition:
    """One EPD line as a playable position, or SuiteError saying what is wrong with it."""
    try:
        board, ops = chess.Board.from_epd(_epd_text(line))
    except ValueError as e:
        raise SuiteError(f"not an EPD position ({e})") from None
    if not board.is_valid():
        flags = [f.name.lower().replace("_", " ") for f in chess.Status if f and board.status() & f]
        raise SuiteError(f"illegal position ({', '.join(flags)})")
    if not any(board.legal_moves):
        raise SuiteError("no legal move in the position (checkmate or stalemate): nothing to play")
    p = EpdPosition(suite, index, str(ops.get("id", f"{suite}.{index + 1}")), board, ops, lineno)
    p.points  # noqa: B018 (read now: bad STS points fail the position here, not mid-evaluation)
    return p


def read_epd(path: Path | str, suite: str | None = None) -> EpdFile:
    """Every position of an EPD file (blank lines and # comments skipped; CRLF read as LF, a
    UTF-8 byte-order mark ignored), each unplayable line a failure with its reason. SuiteError
    when the file cannot be read as text or holds no position at all."""
    path = Path(path)
    name = suite or path.name.split(".")[0]
    out = EpdFile(name, path, [])
    for lineno, line in enumerate(_decode(path).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.positions.append(parse_epd_line(line, name, len(out.positions), lineno))
        except SuiteError as e:
            out.failures.append(EpdFailure(lineno, str(e), line[:100]))
    if not out.positions:
        if out.failures:
            f = out.failures[0]
            raise SuiteError(
                f"{path}: no readable EPD position in {len(out.failures):,} lines (line {f.line}: {f.reason})"
            )
        raise SuiteError(f"{path}: no EPD positions (empty, or only blank and # lines)")
    return out


def load_epd(path: Path | str, suite: str | None = None) -> list[EpdPosition]:
    """The positions of an EPD file that must be whole (a suite the project ships, a benchmark's):
    a line that does not read raises SuiteError naming the file and line."""
    f = read_epd(path, suite)
    if f.failures:
        bad = f.failures[0]
        raise SuiteError(f"{f.path}:{bad.line}: {bad.reason}")
    return f.positions


_MOVE = r"(?:[NBRQK]?[a-h]?[1-8]?[-x]?[a-h][1-8](?:=?[NBRQnbrq])?|O-O(?:-O)?|0-0(?:-0)?)[+#]?"
"""A move as SAN or UCI writes it (the shape only; legality is python-chess's to say)."""
_STS_ITEM = rf"{_MOVE}\s*=\s*\d+"
_STS_C0 = re.compile(rf"^\s*{_STS_ITEM}(?:\s*,\s*{_STS_ITEM})*\s*,?\s*$")
"""STS's c0: "move=points" items separated by commas (SAN, as in STS1-STS15_LAN_v3.epd, or UCI)."""


def sts_points(board: chess.Board, ops: dict) -> dict[chess.Move, int]:
    """STS points per move: c9 (UCI moves) with c8 (points), else c0 when it has STS's shape
    ("f5=10, Be5+=2, Bf2=3"; SAN or UCI moves; a promotion's "=Q" is part of the move). Any other
    c0 is a comment: no points. SuiteError when the points name an illegal move."""
    if "c9" in ops and "c8" in ops:
        moves, points = str(ops["c9"]).split(), str(ops["c8"]).split()
        if len(moves) != len(points):
            raise SuiteError(f"c9 has {len(moves)} moves but c8 {len(points)} points")
        out = {}
        for m, pts in zip(moves, points):
            try:
                move = chess.Move.from_uci(m)
            except ValueError:
                raise SuiteError(f"c9 move {m!r} is not a UCI move") from None
            if move not in board.legal_moves:
                raise SuiteError(f"c9 move {m} is not legal in the position")
            if not pts.isdigit():
                raise SuiteError(f"c8 points {pts!r} are not a whole number")
            out[move] = int(pts)
        return out
    c0 = ops.get("c0")
    if c0 is None or not _STS_C0.match(str(c0)):
        return {}
    out = {}
    for item in str(c0).split(","):
        if not item.strip():
            continue
        san, _, pts = item.strip().rpartition("=")
        try:
            move = board.parse_san(san.strip())
        except ValueError:
            raise SuiteError(f"c0 move {san.strip()!r} is not a legal move in the position") from None
        out[move] = int(pts)  # a move listed twice (STS Undermine.086) takes its last points, as in c8/c9
    return out


_STS_ID = re.compile(r"^STS\(v[\d.]+\)\s+(.*)\.(\d+)$")


def sts_theme(position_id: str) -> str:
    """The theme of an STS id ("STS(v1.0) Undermine.001" -> "Undermine"), its '/'-separated
    parts sorted so the suite's one reordered spelling of a theme name joins the others."""
    m = _STS_ID.match(position_id.strip())
    theme = m.group(1) if m else position_id.rsplit(".", 1)[0]
    parts = [p.strip() for p in theme.split("/")]
    return "/".join([parts[0], *sorted(parts[1:])]) if len(parts) > 1 else theme


def is_sts(positions: list[EpdPosition]) -> bool:
    """Scored by STS points: some position carries them (a c0 comment is not points)."""
    return any(p.points for p in positions)


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
    pointed: int = 0
    """Positions with STS points (the points' denominator)."""
    themes: dict[str, list[int]] = field(default_factory=dict)
    """STS theme -> [points, max points, positions]."""
    got: list[tuple[str, int]] = field(default_factory=list)
    """Each position with STS points: (its theme, the points the move got), for the intervals."""

    def points_interval(self, theme: str | None = None, seed: int = 0) -> MeanInterval | None:
        """Total STS points (of the suite, or of one theme) with a seeded bootstrap 95% interval
        over its positions (each position one observation: the suite's positions are distinct);
        None when no position has points."""
        x = [pts for t, pts in self.got if theme is None or t == theme]
        if not x:
            return None
        m = mean_interval(x, seed=seed)
        return MeanInterval(float(sum(x)), m.low * len(x), m.high * len(x), m.n)


def score_suite(positions: list[EpdPosition], moves: list[chess.Move]) -> SuiteScore:
    """Points (STS: max 10 a position) and solved count of the moves played."""
    s = SuiteScore()
    for p, move in zip(positions, moves, strict=True):
        s.positions += 1
        pts = p.points
        if pts:
            got, top = pts.get(move, 0), max(pts.values())
            s.pointed += 1
            s.points += got
            s.max_points += top
            t = s.themes.setdefault(sts_theme(p.id), [0, 0, 0])
            t[0] += got
            t[1] += top
            t[2] += 1
            s.got.append((sts_theme(p.id), got))
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
    """|eval_reference - eval_move|, Sabatelli's distance: 0 when the move is the reference (or
    scores the same), never negative (a move scored above the test's is as far off)."""


def reference_moves(positions: list[EpdPosition], engine_best: dict[int, chess.Move]) -> list[chess.Move]:
    """The suite's (first) best move of each position, else the engine's best move."""
    return [p.best_moves[0] if p.best_moves else engine_best[p.index] for p in positions]


def engine_evaluations(
    pool: EnginePool, limit: Limit, boards: Iterable[tuple[object, chess.Board]]
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


KAUFMAN_MATE_PAWNS = 20
"""Sabatelli writes a forced mate as a symbolic 20 pawns; every score is bounded to +/- this."""


def kaufman_delta_cp(
    positions: list[EpdPosition],
    moves: list[chess.Move],
    pool: EnginePool,
    limit: Limit,
    clip: int = KAUFMAN_MATE_PAWNS * 100,
) -> list[DeltaCp]:
    """Sabatelli's delta-cp per position: the distance between the engine's score (at `limit`)
    after the suite's move and its score after the move played, both from the mover's side
    (|after suite's - after played|). Positions with only an avoid move take the engine's best
    move (same limit) as the reference."""
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
        out.append(DeltaCp(p.id, p.board.san(move), p.board.san(ref), e_ref, e_move, abs(e_ref - e_move)))
    return out


def kaufman_summary(deltas: list[DeltaCp], resamples: int = RESAMPLES, seed: int = 0) -> MeanInterval:
    """The mean delta in pawns, with a percentile bootstrap 95% interval over the positions
    (`resamples` draws, seeded: the same deltas give the same interval)."""
    if not deltas:
        raise ValueError("no Kaufman deltas to summarise")
    return mean_interval([d.delta / 100 for d in deltas], resamples=resamples, seed=seed)


def kaufman_rows(suite: str, metric: str, deltas: list[DeltaCp], detail: str) -> list[tuple[str, str, float, int, str]]:
    """evaluation_results rows of a Kaufman mean in pawns: `metric` (the mean, its interval and n
    in the detail) and `metric`_low95 / _high95 (the interval's ends), n the positions."""
    m = kaufman_summary(deltas)
    return [
        (suite, metric, m.mean, m.n, f"{m.text()}; {detail}"),
        *interval_rows(suite, metric, m.low, m.high, m.n, "seeded bootstrap over the positions"),
    ]


KAUFMAN_SCALE_DEPTHS = (1, 4, 8)
"""Stockfish's own search depths as the player, the scale beside a network's Kaufman delta."""


def kaufman_scale(
    positions: list[EpdPosition], pool: EnginePool, limit: Limit, depths: tuple[int, ...] = KAUFMAN_SCALE_DEPTHS
) -> dict[int, list[DeltaCp]]:
    """Stockfish as the player, by depth (its best move at that depth, hash cleared per position
    as the pool does), each scored by kaufman_delta_cp at `limit`: the delta a real engine gets
    on the same positions, the scale the networks' figure is read on."""
    out = {}
    for depth in depths:
        found = engine_evaluations(pool, Limit("depth", depth), ((p.index, p.board) for p in positions))
        moves = [chess.Move.from_uci(found[p.index].best_move) for p in positions]
        out[depth] = kaufman_delta_cp(positions, moves, pool, limit)
    return out


def kept_kaufman_scale(
    folder: StorePath,
    positions: list[EpdPosition],
    pool: EnginePool,
    limit: Limit,
    depths: tuple[int, ...] = KAUFMAN_SCALE_DEPTHS,
) -> dict[int, list[DeltaCp]]:
    """kaufman_scale, kept in `folder` (a JSON file named by a hash of the positions with their
    operations, the engine's name, the limit and the depths) and read back from there: the
    scale is the same for every model evaluated on the suite (Stockfish at a fixed depth with
    its hash cleared per position is deterministic), so it is searched once per store."""
    what = {
        "positions": [
            [p.id, p.board.fen(), {k: [str(m) for m in v] if isinstance(v, list) else str(v) for k, v in p.ops.items()}]
            for p in positions
        ],
        "engine": pool.name,
        "limit": str(limit),
        "depths": list(depths),
    }
    path = folder / f"{hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]}.json"
    kept = read_json(path)
    if kept.get("what") == what:
        return {int(d): [DeltaCp(**x) for x in deltas] for d, deltas in kept["deltas"].items()}
    scale = kaufman_scale(positions, pool, limit, depths)
    write_json(path, {"what": what, "deltas": {d: [dataclasses.asdict(x) for x in xs] for d, xs in scale.items()}})
    return scale


def _after_score(e: Evaluation, board: chess.Board, mover_white: bool, clip: int) -> int:
    """The score of the position after a move, from the side that made it, bounded to +/-clip
    cp (engine mate scores are +/-(32000 - plies)) so one missed mate does not swamp an
    average. A checkmated or stalemated position gets no engine search: scored by the rules."""
    if board.is_checkmate():
        return clip
    if board.is_stalemate() or board.is_insufficient_material():
        return 0
    return max(-clip, min(clip, e.score if mover_white else -e.score))
