"""Stockfish over raw UCI: one process wrapper and a pool that labels positions in parallel.

The pool drives every engine from one thread with non-blocking pipes and select(), so a
position costs the engine's search plus its parsing and the python-chess check of its label
(about 0.2 ms of CPU, 2-3% of a depth-8 search's), no thread per engine. Engines that crash
(the pipe closes) or hang (no `bestmove` by the deadline, even after `stop`) are killed,
restarted and their position retried; a position that fails `retries + 1` times comes back as a Failure with the reason.

Every reply is tied to its request: each position's commands open with a fence, commands
Stockfish answers only after the previous search has printed everything and before this
one starts (`ucinewgame` + `isready` -> `readyok` when the hash is cleared; a `go perft 1`
of a stalemate -> `Nodes searched: 0` when it is kept). The lines between two fences are
one search's, so a search that ends without `bestmove`, or with a malformed line, is a
failed try of that position only, never a reply shifted onto the next one; a line no search
prints (neither `info` nor `bestmove`) ends its search at once as a malformed reply, rather
than after the timeout as a hang; output that
cannot belong to one search (a second `bestmove`) restarts the engine. Each label is then
validated (`check_label`: best move and PV legal in its FEN, scores in range, depth within
the limit) before it is returned; one that fails is a failed try too.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import chess

from pipeline.parallel import check_workers

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
STALEMATE_FEN = "k7/8/1Q6/8/8/8/8/7K b - - 0 1"
"""No legal move: its `go perft 1` prints only `Nodes searched: 0`, the hash-kept fence."""
STOP_GRACE_S = 2.0
POLL_S = 0.004
SLEEP_DIV = 2
"""With every engine's queue full, the driver sleeps min(POLL_S, mean search time / SLEEP_DIV)
between reads: fewer wake-ups, and the engines still never run dry (two searches queued)."""
HANDSHAKE_TIMEOUT_S = 30.0


class EngineNotFound(RuntimeError):
    pass


class EngineError(RuntimeError):
    """The engine died, hung or spoke something that is not UCI."""


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


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity mask: a container's or taskset's share)."""
    return sorted(os.sched_getaffinity(0))


CORE_CLAIMS = Path(tempfile.gettempdir()) / "chess-pipeline-cores"
"""Per-machine claims of pinned cores: `core-<n>.lock`, flocked by the pool whose engine runs
there, so pools in several processes of one machine (a Celery worker's concurrency, two runs)
pin their engines to different cores. The kernel drops a dead holder's claim."""


def claim_cores(n: int) -> tuple[list[int], list[int]]:
    """Claim n of this process's usable cores that no other pool on the machine holds; returns
    (cores, lock fds: close them to give the cores back). Too few free cores is a ValueError
    saying how many are taken."""
    usable = usable_cores()
    CORE_CLAIMS.mkdir(parents=True, exist_ok=True)
    cores, fds = [], []
    for core in usable:
        if len(cores) == n:
            break
        fd = os.open(CORE_CLAIMS / f"core-{core}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        cores.append(core)
        fds.append(fd)
    if len(cores) < n:
        for fd in fds:
            os.close(fd)
        raise ValueError(
            f"pin_cores: {n} core(s) wanted, {len(cores)} of the {len(usable)} this process may use are free "
            f"(the others pin engines of other pools on this machine, {CORE_CLAIMS}): lower workers, or the "
            "labels steps that run at once on this machine (the stockfish queue's worker concurrency), or "
            "turn pin_cores off"
        )
    return cores, fds


def pin_process(pid: int, cpus: Iterable[int]) -> None:
    """Pin every thread of process `pid` to `cpus` (Linux affinity is per thread; threads it
    starts later inherit its main thread's mask, pinned first)."""
    cores = set(cpus)
    os.sched_setaffinity(pid, cores)
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        if tid != pid:
            try:
                os.sched_setaffinity(tid, cores)
            except ProcessLookupError:  # the thread ended meanwhile
                pass


class UciEngine:
    """One engine process spoken to over raw UCI pipes."""

    def __init__(self, path: str, threads: int = 1, hash_mb: int = 16, cpus: tuple[int, ...] = ()):
        self.path = path
        self.threads = threads
        self.hash_mb = hash_mb
        self.cpus = cpus
        """Cores every thread of the process is pinned to (each start, restarts too); () = not pinned."""
        self.proc: subprocess.Popen | None = None
        self.name = ""
        self._buf = b""
        self._lines: deque[bytes] = deque()

    def start(self) -> UciEngine:
        self.proc = subprocess.Popen(
            [self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
        )
        self._buf = b""
        self._lines.clear()
        self.send(b"uci\n")
        for line in self.lines_until(b"uciok", HANDSHAKE_TIMEOUT_S):
            if line.startswith(b"id name "):
                self.name = line[8:].decode().strip()
        if not self.name:
            raise EngineError(f"{self.path} did not send `id name` before uciok: not a UCI engine?")
        self.send(
            f"setoption name Threads value {self.threads}\nsetoption name Hash value {self.hash_mb}\nisready\n".encode()
        )
        for _ in self.lines_until(b"readyok", HANDSHAKE_TIMEOUT_S):
            pass
        if self.cpus:  # after `readyok`: the search threads `setoption Threads` made exist now
            pin_process(self.pid, self.cpus)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def fileno(self) -> int:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
        except (BrokenPipeError, OSError) as e:
            raise EngineError(f"engine exited ({self.exit_description()})") from e

    def exit_description(self) -> str:
        """How the process ended; it closed its output, so give it a moment to be reaped."""
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        if code is None:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def read_available(self) -> bool:
        """Read what the pipe holds into complete lines; False when the engine closed it."""
        data = os.read(self.fileno(), 1 << 16)
        if not data:
            return False
        buf = self._buf + data
        *complete, self._buf = buf.split(b"\n")
        self._lines.extend(complete)
        return True

    def partial_line(self) -> bytes | None:
        """What the engine printed after its last newline (None when nothing)."""
        return self._buf if self._buf.strip() else None

    def pop_line(self) -> bytes | None:
        return self._lines.popleft() if self._lines else None

    def lines_until(self, token: bytes, timeout: float) -> Iterator[bytes]:
        """Blocking read up to and including the line starting with token."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.pop_line()
            if line is not None:
                yield line
                if line.startswith(token):
                    return
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineError(f"no {token.decode()!r} from {self.path} within {timeout:.0f}s")
            ready, _, _ = select.select([self.fileno()], [], [], left)
            if ready and not self.read_available():
                raise EngineError(f"{self.path} exited ({self.exit_description()}) before {token.decode()!r}")

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"quit\n")  # type: ignore[union-attr]
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close()


_CLEARED_FENCE = b"ucinewgame\nisready\n"
_KEPT_FENCE = f"position fen {STALEMATE_FEN}\ngo perft 1\n".encode()


def _position_commands(fen: str, limit: Limit, clear_hash: bool) -> tuple[bytes, bytes]:
    """One position's commands, and the token of the fence line that opens its output.

    Stockfish reads `ucinewgame` and `go` only once the running search has printed
    `bestmove`, and then answers `isready` / a perft at once, so a search's fence line comes
    after everything the previous search printed and before anything this one prints: the
    lines between two fences are one search's. With clear_hash the fence is `ucinewgame` +
    `isready` (which also clears the hash and history for this position); with the hash
    kept it is a perft of a position with no legal move (`Nodes searched: 0`), which leaves
    the hash, history and search state as they were (labels are identical with or without
    it). The fence goes before the position rather than after it, so that a `stop` sent
    during the last search in flight reaches that search. The static evaluation is answered
    at once: `isready` before it is its fence, the `isready` after `eval` its end (both
    `readyok`), so an eval figure can only be taken between its own two."""
    head = f"position fen {fen}\n".encode()
    if limit.kind == "static":
        return b"isready\n" + head + limit.commands(), b"readyok"
    if clear_hash:
        return _CLEARED_FENCE + head + limit.commands(), b"readyok"
    return _KEPT_FENCE + head + limit.commands(), b"Nodes searched"


FENCE_CHECK_MS = 300


def _check_kept_fence(engine: UciEngine) -> None:
    """The hash-kept fence (a perft) works only where the engine answers it after the running
    search, as Stockfish 15.1 does; Stockfish 17 answers a perft at once, during the search,
    so a fence there would split one search's output. Checked on a live engine before any
    label: a short search, the fence sent right behind it, and which answer comes first."""
    engine.send(f"position startpos\ngo movetime {FENCE_CHECK_MS}\n".encode() + _KEPT_FENCE)
    first = None
    for line in engine.lines_until(b"Nodes searched", HANDSHAKE_TIMEOUT_S):
        if first is None and line.startswith(b"bestmove"):
            first = line
    if first is None:
        raise EngineError(
            f"{engine.name or engine.path} answers `go perft` during a search, so hash-kept labels cannot be tied "
            "to their positions: use the reproducible setting (the default; it clears the hash before each position)"
        )
    engine.send(b"ucinewgame\nisready\n")
    for _ in engine.lines_until(b"readyok", HANDSHAKE_TIMEOUT_S):
        pass


class _SearchState:
    """Collects one position's output: after its fence line, the last scored info line and
    `bestmove`, or the eval figure. `done` at `bestmove` (at the closing `readyok` for the
    static eval, whose fence and end are the same token); `next_fence` when the next
    position's fence came first (this search ended without `bestmove`); `lost` when the
    output cannot belong to this search (the engine is out of step)."""

    __slots__ = (
        "fence",
        "static_eval",
        "started",
        "last",
        "best",
        "static",
        "static_none",
        "done",
        "next_fence",
        "lost",
        "malformed",
        "tail",
    )

    def __init__(self, fence: bytes, static_eval: bool = False):
        self.fence = fence
        self.static_eval = static_eval
        self.started = False
        self.last: bytes | None = None
        self.best: bytes | None = None
        self.static: bytes | None = None
        self.static_none: bytes | None = None
        self.done = False
        self.next_fence: bytes | None = None
        self.lost: str | None = None
        self.malformed: bytes | None = None
        self.tail: bytes | None = None
        """The last line of this search's output (what an engine that exits said last)."""

    def feed(self, line: bytes) -> None:
        if line.strip():
            self.tail = line
        if not self.started:
            if line.startswith(self.fence):  # type: ignore[arg-type]
                self.started = True
            elif line.strip() and not line.startswith(b"info string"):
                self.lost = f"engine output out of step: {line[:60].decode(errors='replace')!r} before the fence"
            return
        if self.static_eval:
            if line.startswith(b"Final evaluation"):
                if self.static is not None or self.static_none is not None:
                    self.lost = "engine output out of step: two evaluations for one position"
                elif b"none" in line:
                    self.static_none = line
                else:
                    self.static = line
            elif line.startswith(b"readyok"):
                self.done = True
            elif line.startswith(b"bestmove"):
                self.lost = "engine output out of step: `bestmove` in a static evaluation"
            return
        if line.startswith(b"info"):
            if b" score " in line:
                self.last = line
        elif line.startswith(b"bestmove"):
            self.best = line
            self.done = True
        elif line.startswith(self.fence):
            self.next_fence = line
            self.done = True
        elif line.strip():
            # A search prints `info` lines and then `bestmove`, nothing else: this reply is
            # malformed, and waiting for a `bestmove` that may never come would cost the whole
            # timeout. Ended here as a failed try; should the search go on printing, its lines
            # come before the next fence and restart the engine (`lost`).
            self.malformed = line
            self.done = True

    def result(self, search: bool) -> dict:
        """The fields of the label, or {"error": ...} (no answer to give), or {"bad": ...}
        (the output was malformed or incomplete: a failed try)."""
        try:
            if self.static is not None:
                return {"static_white_cp": round(final_evaluation_pawns(self.static) * 100)}
            if self.static_none is not None:
                return {"error": "in check: Stockfish gives no static evaluation"}
            if self.malformed is not None:
                return {"bad": f"malformed reply where `bestmove` was due; its line {_excerpt(self.malformed)}"}
            if search and self.best is None:
                return {"bad": "the search ended without `bestmove`"}
            if self.best is None and self.last is None:
                return {"bad": "no evaluation in the engine's output"}
            info = parse_info(self.last) if self.last is not None else {}
            if self.best is not None:
                parts = self.best.split()
                move = parts[1].decode() if len(parts) > 1 else "(none)"
                info["bestmove"] = None if move == "(none)" else move
            return info
        except (ValueError, IndexError) as e:
            return {"bad": str(e) if isinstance(e, MalformedOutput) else f"malformed engine output ({e})"}


def _excerpt(line: bytes) -> str:
    """An engine's line as a message quotes it: decoded, at most 80 characters."""
    text = line.decode(errors="replace").strip()
    return repr(text if len(text) <= 80 else text[:77] + "...")


def final_evaluation_pawns(line: bytes) -> float:
    """Stockfish's static evaluation in pawns, White's view, from the line of its `eval` output
    `Final evaluation       +0.25 (white side) [with scaled NNUE, hybrid, ...]`; ValueError or
    IndexError when the line has no number there."""
    return float(line.split()[2])


@dataclass
class _Flight:
    """A job whose commands the engine has been sent."""

    job: Job
    state: _SearchState
    suspect: bool = False
    """Sent before a `stop` that may have hit it instead of the search it was meant for."""


@dataclass
class _Slot:
    """One engine of the pool and the work it holds."""

    engine: UciEngine
    queue: deque = field(default_factory=deque)
    """Jobs taken from the source, not yet sent."""
    inflight: deque = field(default_factory=deque)
    """Jobs sent: the head is being searched, the rest wait in the engine's input."""
    deadline: float = 0.0
    stopping: bool = False
    timed_out: bool = False


DEFAULT_TIMEOUT_S = 60.0
"""A pool's search timeout when its settings leave it at 0 (the labels asset measures its own)."""


@dataclass(frozen=True)
class EngineSettings:
    """How a pool's engines are found, started and supervised: the schema of EnginePool's
    parameters and of the Stockfish resource's fields (assets.resources derives them)."""

    path: str = ""
    """Engine binary; empty: STOCKFISH_PATH, PATH, /usr/games/stockfish."""
    workers: int = 0
    """Engine processes in the pool; 0 = one per core."""
    threads: int = 1
    """Search threads per engine (UCI Threads)."""
    hash_mb: int = 16
    """Hash table per engine in MB (UCI Hash)."""
    timeout_s: float = 0.0
    """A search with no result after this long is stopped (and the engine restarted if it hangs);
    0 = measured: the labels asset times its limit on a few positions and allows 20x the
    slowest, at least 2 s (other users of the pool get 60 s)."""
    retries: int = 2
    """Further tries for a position whose engine crashed or hung; then it is recorded as failed."""
    clear_hash: bool = True
    """Clear the engine's hash (`ucinewgame`) before every position, so each label is exactly
    what a fresh engine says: the same FEN, engine and limit give the same label whatever the
    order or the number of engines (needs threads 1). False: the hash-kept setting, faster
    (the hash carries over from the previous ply), but a label depends on what its engine
    searched before; its labels are a setting of their own (`<engine>_<limit>_hash-kept`,
    hash_cleared false), never mixed with the reproducible ones."""
    pin_cores: bool = False
    """Pin each engine process to cores of its own (threads cores each, from the cores this
    process may use), so engines neither migrate nor share a core: for a machine whose labels
    step has every core (one engine per core). workers x threads must fit in those cores;
    workers 0 is then one engine per usable core."""

    def __post_init__(self) -> None:
        if self.timeout_s < 0 or self.retries < 0:
            raise ValueError(
                f"stockfish settings: timeout_s must be 0 (measured) or more and retries 0 or more, "
                f"got timeout_s={self.timeout_s:g}, retries={self.retries}"
            )

    def binary(self) -> str:
        """The engine binary these settings name (find_stockfish: path, STOCKFISH_PATH, PATH, Debian's)."""
        return find_stockfish(self.path or None)


_ENGINE = EngineSettings()


class EnginePool:
    """`workers` engine processes labelling a stream of Jobs; use as a context manager.

    Each engine always holds the next positions' commands in its input (`pipeline` jobs in
    flight), so it starts the next search the moment it prints `bestmove` and never waits
    for this process; that lets the driver read engine output in batches (a wake-up per
    search or two, not per line), which matters when the engines use every core. Stockfish
    queues a `position` + `go` sent during a search until the search ends.

    Each position's output opens with its fence (see `_position_commands`), so a reply is
    matched to its own request, and every label passes `check_label` before it is returned.

    clear_hash (the default) clears the engine's hash and history before every position
    (`ucinewgame`): each label is exactly what a fresh engine says, whatever the order of
    the positions or the number of engines, given the engine, limit and hash size (recorded
    in every label). It needs threads=1: Stockfish's multi-threaded search depends on thread
    timing. clear_hash=False keeps the hash from one position to the next: faster (work is
    handed out in batches of consecutive jobs, so each engine sees runs of related positions,
    game by game), but a label then depends on what that engine searched before it; labels
    stores those under a setting of their own.
    """

    def __init__(
        self,
        path: str,
        workers: int = _ENGINE.workers,
        threads: int = _ENGINE.threads,
        hash_mb: int = _ENGINE.hash_mb,
        timeout_s: float = _ENGINE.timeout_s,
        retries: int = _ENGINE.retries,
        clear_hash: bool = _ENGINE.clear_hash,
        pin_cores: bool = _ENGINE.pin_cores,
        batch: int = 16,
        pipeline: int = 3,
    ):
        """`path` is the engine binary; the other settings are EngineSettings' (timeout_s 0:
        DEFAULT_TIMEOUT_S). `from_settings` builds a pool from an EngineSettings."""
        if clear_hash and threads != 1:
            raise ValueError(
                f"threads={threads} with clear_hash: Stockfish's search on several threads depends "
                "on their timing, so labels would not be reproducible; use threads=1 (and more "
                "workers), or clear_hash=False for the hash-kept setting"
            )
        self.path = path
        self.workers = check_workers(workers) or os.cpu_count() or 1
        self.threads = threads
        self.hash_mb = hash_mb
        self.timeout_s = timeout_s if timeout_s > 0 else DEFAULT_TIMEOUT_S
        self.retries = retries
        self.clear_hash = clear_hash
        self.pin_cores = pin_cores
        self.cores: list[tuple[int, ...]] = []
        """With pin_cores, each engine's cores while the pool runs (threads of them, claimed on this
        machine: no core twice, see claim_cores); else empty."""
        self._core_claims: list[int] = []
        if pin_cores:
            usable = usable_cores()
            self.workers = workers or len(usable)
            if self.workers * threads > len(usable):
                raise ValueError(
                    f"pin_cores: {self.workers} engine(s) x {threads} thread(s) need {self.workers * threads} "
                    f"cores, this process may use {len(usable)} ({', '.join(map(str, usable))}): lower workers "
                    "(0 = one engine per usable core) or threads, or turn pin_cores off"
                )
        self.batch = batch
        self.pipeline = max(1, pipeline)
        self.slots: list[_Slot] = []
        self.restarts = 0
        """Engines restarted (crashed, hung or out of step) since the pool started."""
        self.retried = 0
        """Tries that failed and were tried again (a position that failed every try is not
        counted here but returned as a Failure) since the pool started."""
        self.name = ""

    @classmethod
    def from_settings(cls, settings: EngineSettings, **kwargs) -> EnginePool:
        """A new, not yet started pool with these settings (the binary found from settings.path);
        kwargs: batch, pipeline."""
        fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name != "path"}
        return cls(settings.binary(), **fields, **kwargs)

    def __enter__(self) -> EnginePool:
        try:
            if self.pin_cores:
                claimed, self._core_claims = claim_cores(self.workers * self.threads)
                t = self.threads
                self.cores = [tuple(claimed[i * t : (i + 1) * t]) for i in range(self.workers)]
            for i in range(self.workers):
                cpus = self.cores[i] if self.cores else ()
                self.slots.append(_Slot(UciEngine(self.path, self.threads, self.hash_mb, cpus).start()))
            if not self.clear_hash:
                _check_kept_fence(self.slots[0].engine)
        except BaseException:
            self.close()
            raise
        self.name = self.slots[0].engine.name
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for s in self.slots:
            if s.inflight:
                s.engine.kill()  # mid-search: no point waiting for it
            else:
                s.engine.close()
        self.slots = []
        for fd in self._core_claims:  # after the engines are gone: the cores are free again
            os.close(fd)
        self._core_claims, self.cores = [], []

    @property
    def pids(self) -> list[int]:
        return [s.engine.pid for s in self.slots if s.engine.proc is not None]

    # The driver ----------------------------------------------------------------------

    def run(self, jobs: Iterable[Job], limit: Limit) -> Iterator[Evaluation | Failure]:
        """Label every job; results come back as engines finish, in no fixed order."""
        if not self.slots:
            raise RuntimeError("EnginePool.run outside `with EnginePool(...)`")
        self._source = iter(jobs)
        self._exhausted = False
        self._limit = limit
        self._attempts: dict[int, int] = {}
        self._by_fd = {s.engine.fileno(): s for s in self.slots}
        mean_job_s = 0.0
        for slot in self.slots:
            self._top_up(slot)
        while True:
            busy = [s for s in self.slots if s.inflight]
            if not busy:
                return
            wait = max(0.0, min(s.deadline for s in busy) - time.monotonic())
            ready, _, _ = select.select([s.engine.fileno() for s in busy], [], [], wait)
            for fd in ready:
                slot = self._by_fd[fd]
                if not slot.engine.read_available():
                    yield from self._engine_lost(slot, self._exit_reason(slot))
                    continue
                while slot.inflight:
                    line = slot.engine.pop_line()
                    if line is None:
                        break
                    head = slot.inflight[0]
                    head.state.feed(line)
                    if head.state.lost is not None:
                        break
                    if not head.state.done:
                        continue
                    slot.inflight.popleft()
                    if head.state.next_fence is not None and slot.inflight:
                        slot.inflight[0].state.feed(head.state.next_fence)  # it opens the next search
                    now = time.monotonic()
                    took = self.timeout_s - (slot.deadline - now) if not slot.stopping else self.timeout_s
                    mean_job_s = took if mean_job_s == 0 else 0.9 * mean_job_s + 0.1 * took
                    if slot.timed_out:
                        # It answered `stop`: alive, but the search was cut short.
                        yield from self._failed_try(slot, head.job, f"no result within {self.timeout_s:g}s")
                    elif head.suspect:
                        slot.queue.appendleft(head.job)  # the stop may have cut it short: again, free
                    else:
                        out = self._finish(head)
                        if isinstance(out, str):
                            yield from self._failed_try(slot, head.job, out)
                        else:
                            yield out
                    slot.stopping = slot.timed_out = False
                    slot.deadline = now + self.timeout_s
                    self._top_up(slot)
                if slot.inflight and slot.inflight[0].state.lost is not None:
                    # The output no longer lines up with the requests: nothing more from this
                    # engine can be trusted; restart it.
                    yield from self._engine_lost(slot, slot.inflight[0].state.lost)
            now = time.monotonic()
            for slot in self.slots:
                if not slot.inflight or now < slot.deadline:
                    continue
                if not slot.stopping:
                    slot.stopping = slot.timed_out = True
                    slot.deadline = now + STOP_GRACE_S
                    for f in list(slot.inflight)[1:]:
                        f.suspect = True
                    self._send(slot, b"stop\n")
                    continue
                yield from self._engine_lost(
                    slot, f"engine hung: no result within {self.timeout_s:g}s, nor after `stop`"
                )
            if ready and all(len(s.inflight) >= self.pipeline for s in self.slots if s.inflight):
                # Every engine has its next job queued: let output pile up for a moment
                # rather than waking for each info line.
                time.sleep(min(POLL_S, mean_job_s / SLEEP_DIV))

    def _exit_reason(self, slot: _Slot) -> str:
        """Why the engine's output ended: `engine crashed (killed by signal 9)` or `engine exited
        (exit code 0)`; then (after `;`, so that failure_reasons groups by the first part) the
        last line the search in hand had from it."""
        how = slot.engine.exit_description()
        verb = "exited" if how == "exit code 0" else "crashed"
        tail = slot.engine.partial_line() or (slot.inflight[0].state.tail if slot.inflight else None)
        return f"engine {verb} ({how})" + (f"; its last line {_excerpt(tail)}" if tail else "; no reply to this search")

    def _send(self, slot: _Slot, data: bytes) -> None:
        try:
            slot.engine.send(data)
        except EngineError:
            pass  # the select loop sees the closed pipe and restarts the engine

    def _top_up(self, slot: _Slot) -> None:
        """Send jobs until `pipeline` are in flight (or the source runs dry)."""
        while len(slot.inflight) < self.pipeline:
            if not slot.queue and not self._exhausted:
                for _ in range(self.batch):
                    nxt = next(self._source, None)
                    if nxt is None:
                        self._exhausted = True
                        break
                    slot.queue.append(nxt)
            if not slot.queue:
                return
            job = slot.queue.popleft()
            if not slot.inflight:
                slot.deadline = time.monotonic() + self.timeout_s
                slot.stopping = slot.timed_out = False
            commands, fence = _position_commands(job.fen, self._limit, self.clear_hash)
            slot.inflight.append(_Flight(job, _SearchState(fence, static_eval=self._limit.kind == "static")))
            self._send(slot, commands)

    def _finish(self, flight: _Flight) -> Evaluation | Failure | str:
        """The label of a finished search, a Failure (the engine's definite answer that
        there is none), or the reason this try failed (malformed or invalid output)."""
        job = flight.job
        tries = self._attempts.get(id(job), 0) + 1
        limit = self._limit
        r = flight.state.result(search=limit.kind != "static")
        if "bad" in r:
            return r["bad"]
        if "error" in r:
            self._attempts.pop(id(job), None)
            return Failure(job, r["error"], tries)
        if "static_white_cp" in r:
            cp = r["static_white_cp"]
            ev = Evaluation(job, cp, None, cp, None, None, 0, 0, 0, 0, tries)
        else:
            cp, mate, score = white_pov(job, r.get("cp"), r.get("mate"))
            ev = Evaluation(
                job,
                cp,
                mate,
                score,
                r.get("bestmove"),
                r.get("pv"),
                r.get("depth", 0),
                r.get("seldepth", 0),
                r.get("nodes", 0),
                r.get("time", 0),
                tries,
            )
        why = check_label(ev, limit)
        if why is not None:
            return f"invalid label: {why}"
        self._attempts.pop(id(job), None)
        return ev

    def _failed_try(self, slot: _Slot, job: Job, reason: str) -> Iterator[Failure]:
        """Count a failed try of job: queue it again on this slot, or give it up as a Failure."""
        tries = self._attempts.get(id(job), 0) + 1
        if tries > self.retries:
            self._attempts.pop(id(job), None)
            yield Failure(job, f"{reason}; {tries} tries", tries)
        else:
            self._attempts[id(job)] = tries
            self.retried += 1
            slot.queue.appendleft(job)

    def _engine_lost(self, slot: _Slot, reason: str) -> Iterator[Failure]:
        """The engine crashed or hung: restart it; its current job has failed a try, and the
        jobs queued behind it go again without counting one."""
        flights = list(slot.inflight)
        slot.inflight.clear()
        for f in reversed(flights[1:]):
            slot.queue.appendleft(f.job)
        self._by_fd.pop(slot.engine.fileno(), None)
        slot.engine.kill()
        slot.engine.start()
        self._by_fd[slot.engine.fileno()] = slot
        self.restarts += 1
        if flights:
            yield from self._failed_try(slot, flights[0].job, reason)
        self._top_up(slot)
