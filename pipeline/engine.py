"""Stockfish over raw UCI: one process wrapper and a pool that labels positions in parallel.

The pool drives every engine from one thread with non-blocking pipes and select(), so a
position costs the engine's search plus a few microseconds of parsing: no python-chess in
the loop, no thread per engine. Engines that crash (the pipe closes) or hang (no
`bestmove` by the deadline, even after `stop`) are killed, restarted and their position
retried; a position that fails `retries + 1` times comes back as a Failure with the reason.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEBIAN_PATH = "/usr/games/stockfish"
LIMIT_KINDS = ("depth", "nodes", "static")
MATE_SCORE = 32000
"""A mate in n plies scores +/-(MATE_SCORE - n) in `score`, as Stockfish orders them."""
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
    """STOCKFISH_PATH (or an explicit path), then PATH, then Debian's /usr/games/stockfish."""
    env = os.environ if environ is None else environ
    candidates = [explicit, env.get("STOCKFISH_PATH"), shutil.which("stockfish", path=env.get("PATH")), DEBIAN_PATH]
    for c in candidates:
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

    kind: str = "depth"
    value: int = 8

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


def parse_info(line: bytes) -> dict:
    """The fields of a UCI `info ... score ...` line that a label keeps."""
    tok = line.split()
    out: dict = {}
    i = 1
    n = len(tok)
    while i < n:
        t = tok[i]
        if t == b"pv":
            out["pv"] = b" ".join(tok[i + 1:]).decode()
            break
        if t == b"score":
            out[tok[i + 1].decode()] = int(tok[i + 2])
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


class UciEngine:
    """One engine process spoken to over raw UCI pipes."""

    def __init__(self, path: str, threads: int = 1, hash_mb: int = 16):
        self.path = path
        self.threads = threads
        self.hash_mb = hash_mb
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
        self.send(f"setoption name Threads value {self.threads}\nsetoption name Hash value {self.hash_mb}\n"
                  "isready\n".encode())
        for _ in self.lines_until(b"readyok", HANDSHAKE_TIMEOUT_S):
            pass
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


def _position_commands(fen: str, limit: Limit, clear_hash: bool) -> bytes:
    head = b"ucinewgame\n" if clear_hash else b""
    return head + f"position fen {fen}\n".encode() + limit.commands()


class _SearchState:
    """Collects one search's output: the last scored info line, bestmove, or the eval figure."""

    __slots__ = ("last", "best", "static", "static_none", "done")

    def __init__(self):
        self.last: bytes | None = None
        self.best: bytes | None = None
        self.static: bytes | None = None
        self.static_none: bytes | None = None
        self.done = False

    def feed(self, line: bytes) -> None:
        if line.startswith(b"info") and b" score " in line:
            self.last = line
        elif line.startswith(b"bestmove"):
            self.best = line
            self.done = True
        elif line.startswith(b"Final evaluation"):
            if b"none" in line:
                self.static_none = line
            else:
                self.static = line
        elif line.startswith(b"readyok"):
            self.done = True

    def result(self) -> dict:
        if self.static is not None:
            pawns = float(self.static.split()[2])  # "Final evaluation  +0.25 (white side) ..."
            return {"static_white_cp": round(pawns * 100)}
        if self.static_none is not None:
            return {"error": "in check: Stockfish gives no static evaluation"}
        if self.best is None and self.last is None:
            return {"error": "no evaluation in the engine's output"}
        info = parse_info(self.last) if self.last is not None else {}
        if self.best is not None:
            parts = self.best.split()
            move = parts[1].decode() if len(parts) > 1 else "(none)"
            info["bestmove"] = None if move == "(none)" else move
        return info


@dataclass
class _Flight:
    """A job whose commands the engine has been sent."""

    job: Job
    state: _SearchState = field(default_factory=_SearchState)
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


class EnginePool:
    """`workers` engine processes labelling a stream of Jobs; use as a context manager.

    Each engine always holds the next positions' commands in its input (`pipeline` jobs in
    flight), so it starts the next search the moment it prints `bestmove` and never waits
    for this process; that lets the driver read engine output in batches (a wake-up per
    search or two, not per line), which matters when the engines use every core. Stockfish
    queues a `position` + `go` sent during a search until the search ends.

    Work is handed out in batches of consecutive jobs, so each engine sees runs of related
    positions (callers order jobs game by game) and its hash table carries over from one
    to the next. clear_hash sends `ucinewgame` before every position instead, which makes
    each label exactly what a fresh engine would say, at about 0.65x the speed.
    """

    def __init__(self, path: str, workers: int = 0, threads: int = 1, hash_mb: int = 16,
                 timeout_s: float = 60.0, retries: int = 2, clear_hash: bool = False, batch: int = 16,
                 pipeline: int = 3):
        self.path = path
        self.workers = workers or os.cpu_count() or 1
        self.threads = threads
        self.hash_mb = hash_mb
        self.timeout_s = timeout_s
        self.retries = retries
        self.clear_hash = clear_hash
        self.batch = batch
        self.pipeline = max(1, pipeline)
        self.slots: list[_Slot] = []
        self.restarts = 0
        self.name = ""

    def __enter__(self) -> EnginePool:
        try:
            for _ in range(self.workers):
                self.slots.append(_Slot(UciEngine(self.path, self.threads, self.hash_mb).start()))
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
                    yield from self._engine_lost(slot, f"engine crashed ({slot.engine.exit_description()})")
                    continue
                while slot.inflight:
                    line = slot.engine.pop_line()
                    if line is None:
                        break
                    head = slot.inflight[0]
                    head.state.feed(line)
                    if not head.state.done:
                        continue
                    slot.inflight.popleft()
                    now = time.monotonic()
                    took = self.timeout_s - (slot.deadline - now) if not slot.stopping else self.timeout_s
                    mean_job_s = took if mean_job_s == 0 else 0.9 * mean_job_s + 0.1 * took
                    if slot.timed_out:
                        # It answered `stop`: alive, but the search was cut short.
                        yield from self._failed_try(slot, head.job, f"no result within {self.timeout_s:g}s")
                    elif head.suspect:
                        slot.queue.appendleft(head.job)  # the stop may have cut it short: again, free
                    else:
                        yield self._finish(head)
                    slot.stopping = slot.timed_out = False
                    slot.deadline = now + self.timeout_s
                    self._top_up(slot)
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
                    slot, f"engine hung: no result within {self.timeout_s:g}s, nor after `stop`")
            if ready and all(len(s.inflight) >= self.pipeline for s in self.slots if s.inflight):
                # Every engine has its next job queued: let output pile up for a moment
                # rather than waking for each info line.
                time.sleep(min(POLL_S, mean_job_s / SLEEP_DIV))

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
            slot.inflight.append(_Flight(job))
            self._send(slot, _position_commands(job.fen, self._limit, self.clear_hash))

    def _finish(self, flight: _Flight) -> Evaluation | Failure:
        job = flight.job
        tries = self._attempts.pop(id(job), 0) + 1
        r = flight.state.result()
        if "error" in r:
            return Failure(job, r["error"], tries)
        if "static_white_cp" in r:
            cp = r["static_white_cp"]
            return Evaluation(job, cp, None, cp, None, None, 0, 0, 0, 0, tries)
        cp, mate, score = white_pov(job, r.get("cp"), r.get("mate"))
        if cp is None and mate is None:
            return Failure(job, "engine gave no score", tries)
        return Evaluation(job, cp, mate, score, r.get("bestmove"), r.get("pv"), r.get("depth", 0),
                          r.get("seldepth", 0), r.get("nodes", 0), r.get("time", 0), tries)

    def _failed_try(self, slot: _Slot, job: Job, reason: str) -> Iterator[Failure]:
        """Count a failed try of job: queue it again on this slot, or give it up as a Failure."""
        tries = self._attempts.get(id(job), 0) + 1
        if tries > self.retries:
            self._attempts.pop(id(job), None)
            yield Failure(job, f"{reason}; {tries} tries", tries)
        else:
            self._attempts[id(job)] = tries
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
