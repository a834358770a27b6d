"""One Stockfish process over raw UCI (UciEngine), the fences that tie each reply to its
request, the state of one position's search, and the claiming and pinning of cores.

Every reply is tied to its request: each position's commands open with a fence, commands
Stockfish answers only after the previous search has printed everything and before this
one starts (`ucinewgame` + `isready` -> `readyok` when the hash is cleared; a `go perft 1`
of a stalemate -> `Nodes searched: 0` when it is kept). The lines between two fences are
one search's (SearchState), so a search that ends without `bestmove`, or with a malformed
line, is a failed try of that position only, never a reply shifted onto the next one; a line
no search prints (neither `info` nor `bestmove`) ends its search at once as a malformed reply,
rather than after the timeout as a hang; output that cannot belong to one search (a second
`bestmove`) restarts the engine (pipeline.labels.pool drives it).
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipeline.labels.uci import Limit, MalformedOutput, excerpt, final_evaluation_pawns, parse_info

STALEMATE_FEN = "k7/8/1Q6/8/8/8/8/7K b - - 0 1"
"""No legal move: its `go perft 1` prints only `Nodes searched: 0`, the hash-kept fence."""
HANDSHAKE_TIMEOUT_S = 30.0


class EngineError(RuntimeError):
    """The engine died, hung or spoke something that is not UCI."""


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


def position_commands(fen: str, limit: Limit, clear_hash: bool) -> tuple[bytes, bytes]:
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


def check_kept_fence(engine: UciEngine) -> None:
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


class SearchState:
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
                return {"bad": f"malformed reply where `bestmove` was due; its line {excerpt(self.malformed)}"}
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
