"""What a label is and how a UCI reply is read: the search limit (Limit, the one label setting
from the flag to the file path), a position to label (Job) and its outcome (Evaluation or
Failure), the fields of an `info` line, scores turned to White's point of view, and the check
every label passes before it is returned.

Each label is validated (`check_label`: best move and PV legal in its FEN, scores in range,
depth within the limit) against python-chess, not the engine; one that fails is a failed try of
its position (pipeline.labels.pool). find_stockfish says which engine binary is meant.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import chess

DEBIAN_PATH = "/usr/games/stockfish"
LimitKind = Literal["depth", "nodes", "static"]
LIMIT_KINDS: tuple[str, ...] = get_args(LimitKind)
MATE_SCORE = 32000
"""A mate in n plies scores +/-(MATE_SCORE - n) in `score`, as Stockfish orders them."""
CP_BOUND = 30000
"""|cp| must be below this. Stockfish 15.1 prints cp = value * 100 / 208 for |value| below
its mate band (31754), so at most 15265; later versions print tablebase wins as cp
+/-(20000 - plies). 30000 keeps every cp below the mate scores of `score` (at least
MATE_SCORE - 2 * MATE_BOUND), so `score` still orders every label; sql/queries/label_checks.sql
takes both bounds as parameters."""
MATE_BOUND = 250
"""|mate| (moves) must be at most this: Stockfish's MAX_PLY is 246 plies, mate in 123 moves."""


class EngineNotFound(RuntimeError):
    pass


def find_stockfish(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """An explicit path, else STOCKFISH_PATH, else PATH, else Debian's /usr/games/stockfish.

    A path given explicitly or through STOCKFISH_PATH must be the engine: a wrong one is an
    error, not a silent fall-back to whatever Stockfish PATH holds."""
    env = os.environ if environ is None else environ
    chosen = explicit or env.get("STOCKFISH_PATH")
    if chosen:
        # A path the user named is the engine they want: never fall back to another one.
        if Path(chosen).is_file() and os.access(chosen, os.X_OK):
            return str(chosen)
        why = "is not executable" if Path(chosen).is_file() else "does not exist"
        raise EngineNotFound(
            f"Stockfish at {chosen} {why} (from {'the configured path' if explicit else 'STOCKFISH_PATH'}): "
            "point it at the engine binary, or unset it to use PATH or /usr/games/stockfish"
        )
    for c in (shutil.which("stockfish", path=env.get("PATH")), DEBIAN_PATH):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    raise EngineNotFound(
        "Stockfish not found: set STOCKFISH_PATH, put `stockfish` on PATH, or install it "
        "(Debian/Ubuntu: `apt-get install -y stockfish`, which puts it at /usr/games/stockfish; "
        "`make install` does this when run as root)"
    )


@dataclass(frozen=True)
class Limit:
    """What one label's search is limited by: `depth N`, `nodes N`, or the static evaluation.

    static uses Stockfish 15.1's `eval` command: the evaluation the search itself calls at
    its leaves (NNUE blended with the classical term, "Final evaluation"), the closest thing
    to the static evaluation DeepChess labelled with. A position in check has none
    (Stockfish prints "none (in check)") and is recorded as a failure with that reason.
    """

    kind: LimitKind = "depth"
    """depth, nodes or static (Stockfish's `eval`: no search)."""
    value: int = 8
    """Depth or node count of the search (ignored for static)."""

    def __post_init__(self):
        if self.kind not in LIMIT_KINDS:
            raise ValueError(f"limit kind must be one of {LIMIT_KINDS}, got {self.kind!r}")
        if self.kind == "static":
            object.__setattr__(self, "value", 0)
        elif self.value < 1:
            raise ValueError(f"{self.kind} limit must be at least 1, got {self.value}")

    def __str__(self) -> str:
        return "static" if self.kind == "static" else f"{self.kind} {self.value}"

    @property
    def slug(self) -> str:
        return "static" if self.kind == "static" else f"{self.kind}-{self.value}"

    @property
    def flags(self) -> str:
        """The CLI flags naming this setting, the same in `label`, `datasets` and `reproduce`:
        `--depth 8`, `--nodes 10000`, `--static` (cli.flags.add_limit_flags)."""
        return "--static" if self.kind == "static" else f"--{self.kind} {self.value}"

    def commands(self) -> bytes:
        if self.kind == "static":
            return b"eval\nisready\n"
        return f"go {self.kind} {self.value}\n".encode()


@dataclass(frozen=True)
class Job:
    """One position to label: an opaque id for the caller, its FEN, and White-to-move."""

    id: object
    fen: str
    white_to_move: bool


@dataclass(frozen=True)
class Evaluation:
    """A finished label, scores from White's point of view."""

    job: Job
    cp: int | None
    mate: int | None
    """Moves to mate, + when White mates, - when Black does; 0: the side to move is mated."""
    score: int
    """cp, or +/-(MATE_SCORE - plies to mate): one White-POV number that orders every label."""
    best_move: str | None
    pv: str | None
    depth: int
    seldepth: int
    nodes: int
    time_ms: int
    attempts: int


@dataclass(frozen=True)
class Failure:
    job: Job
    reason: str
    attempts: int


class MalformedOutput(ValueError):
    """A line the engine printed that does not say what UCI says it should."""


def parse_info(line: bytes) -> dict:
    """The fields of a UCI `info ... score ...` line that a label keeps.

    Raises MalformedOutput for a score or count that is not an integer (`score cp
    notanumber`), a score kind other than cp / mate, or a PV that is not text."""
    tok = line.split()
    out: dict = {}
    i = 1
    n = len(tok)
    try:
        while i < n:
            t = tok[i]
            if t == b"pv":
                out["pv"] = b" ".join(tok[i + 1 :]).decode()
                break
            if t == b"score":
                kind = tok[i + 1]
                if kind not in (b"cp", b"mate"):
                    raise ValueError(f"score kind {kind!r}")
                out[kind.decode()] = int(tok[i + 2])
                i += 3
                while i < n and tok[i] in (b"lowerbound", b"upperbound"):
                    out["bound"] = tok[i].decode()
                    i += 1
                continue
            if t in (b"depth", b"seldepth", b"nodes", b"time") and i + 1 < n:
                out[t.decode()] = int(tok[i + 1])
                i += 2
                continue
            i += 1
    except (ValueError, IndexError) as e:  # UnicodeDecodeError is a ValueError
        raise MalformedOutput(f"malformed engine output {line[:120].decode(errors='replace')!r} ({e})") from None
    return out


def white_pov(job: Job, cp: int | None, mate: int | None) -> tuple[int | None, int | None, int]:
    """Side-to-move scores from UCI -> (cp, mate, score) from White's point of view."""
    sign = 1 if job.white_to_move else -1
    if mate is not None:
        # mate > 0: the side to move mates in `mate` moves (2*mate - 1 plies);
        # mate <= 0: it is mated in -mate moves (2*-mate plies; 0 = mated now).
        plies = 2 * mate - 1 if mate > 0 else -2 * mate
        stm_score = MATE_SCORE - plies if mate > 0 else -(MATE_SCORE - plies)
        return None, sign * mate if mate else 0, sign * stm_score
    return sign * cp, None, sign * cp


_PIECE_TYPE = {c: i % 6 + 1 for i, c in enumerate("PNBRQKpnbrqk")}


def board_from_fen(fen: str) -> chess.Board:
    """chess.Board(fen), about 6x faster: the piece placement is read into bitboards
    directly (python-chess's own parser sets one square at a time), the rest is python-chess.
    For the well-formed FENs the store makes; the test compares it with chess.Board(fen)."""
    placement, turn, castling, ep = fen.split(" ", 4)[:4]
    bbs = [0] * 7
    white = black = 0
    sq = 56
    for ch in placement:
        if ch == "/":
            sq -= 16
        elif ch < "A":  # a digit: empty squares
            sq += ord(ch) - 48
        else:
            bit = 1 << sq
            bbs[_PIECE_TYPE[ch]] |= bit
            if ch < "a":
                white |= bit
            else:
                black |= bit
            sq += 1
    b = chess.Board(None)
    b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings = bbs[1:]
    b.occupied_co[chess.WHITE], b.occupied_co[chess.BLACK], b.occupied = white, black, white | black
    b.turn = turn == "w"
    b.set_castling_fen(castling)
    b.ep_square = None if ep == "-" else chess.parse_square(ep)
    return b


def check_label(ev: Evaluation, limit: Limit) -> str | None:
    """Why this label cannot be the search result of its own FEN, or None when it can be.

    Checked against python-chess, not the engine: the best move and every PV move legal in
    turn from the label's FEN; `bestmove (none)` only where there is no legal move (mate 0
    when checkmated, cp 0 when stalemated); exactly one of cp / mate, |cp| < CP_BOUND,
    |mate| <= MATE_BOUND; a search's depth at least 1 and, under a depth limit, not past it
    (a mate may end a search early, never late)."""
    if (ev.cp is None) == (ev.mate is None):
        return "engine gave no score" if ev.cp is None else "engine gave both cp and mate"
    if ev.cp is not None and not -CP_BOUND < ev.cp < CP_BOUND:
        return f"cp {ev.cp} out of range (|cp| < {CP_BOUND})"
    if ev.mate is not None and abs(ev.mate) > MATE_BOUND:
        return f"mate {ev.mate} out of range (|mate| <= {MATE_BOUND})"
    if limit.kind == "static":
        return None
    board = board_from_fen(ev.job.fen)
    if ev.best_move is None:
        if board.is_checkmate():
            return None if ev.mate == 0 else "checkmated position scored other than mate 0"
        if board.is_stalemate():
            return None if ev.cp == 0 else "stalemate scored other than cp 0"
        return "no best move in a position with legal moves"
    if ev.mate == 0:
        return "mate 0 (checkmated) with a best move"
    if ev.depth < 1:
        return f"depth {ev.depth} for a search"
    if limit.kind == "depth" and ev.depth > limit.value and ev.mate is None:
        return f"depth {ev.depth} past the limit {limit}"
    pv = (ev.pv or "").split()
    if not pv or pv[0] != ev.best_move:  # else the PV's first move is checked below
        try:
            best = chess.Move.from_uci(ev.best_move)
        except ValueError:
            return f"best move {ev.best_move!r} is not a UCI move"
        if not board.is_legal(best):
            return f"best move {ev.best_move} illegal in the position"
    last = len(pv) - 1
    for i, uci in enumerate(pv):
        best = i == 0 and uci == ev.best_move
        try:
            move = chess.Move.from_uci(uci)
        except ValueError:
            return f"{'best move' if best else f'PV move {i + 1}'} {uci!r} is not a UCI move"
        if not board.is_legal(move):
            return f"best move {uci} illegal in the position" if best else f"PV move {i + 1} {uci} illegal"
        if i < last:
            board.push(move)
    return None


def excerpt(line: bytes) -> str:
    """An engine's line as a message quotes it: decoded, at most 80 characters."""
    text = line.decode(errors="replace").strip()
    return repr(text if len(text) <= 80 else text[:77] + "...")


def final_evaluation_pawns(line: bytes) -> float:
    """Stockfish's static evaluation in pawns, White's view, from the line of its `eval` output
    `Final evaluation       +0.25 (white side) [with scaled NNUE, hybrid, ...]`; ValueError or
    IndexError when the line has no number there."""
    return float(line.split()[2])
