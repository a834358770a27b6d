"""Stockfish's process pool: EngineSettings (how a pool's engines are found, started and
supervised) and EnginePool, which labels a stream of positions on several engines in parallel.

The pool drives every engine from one thread with non-blocking pipes and select(), so a
position costs the engine's search plus its parsing and the python-chess check of its label
(about 0.2 ms of CPU, 2-3% of a depth-8 search's), no thread per engine. Engines that crash
(the pipe closes) or hang (no `bestmove` by the deadline, even after `stop`) are killed,
restarted and their position retried; a position that fails `retries + 1` times comes back as a
Failure with the reason. Each reply is matched to its request by its fence (pipeline.labels.engine)
and each label passes check_label (pipeline.labels.uci) before it is returned.
"""

from __future__ import annotations

import dataclasses
import os
import select
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pipeline.labels.engine import (
    EngineError,
    SearchState,
    UciEngine,
    check_kept_fence,
    claim_cores,
    position_commands,
    usable_cores,
)
from pipeline.labels.uci import Evaluation, Failure, Job, Limit, check_label, excerpt, find_stockfish, white_pov
from pipeline.parallel import check_workers

STOP_GRACE_S = 2.0
POLL_S = 0.004
SLEEP_DIV = 2
"""With every engine's queue full, the driver sleeps min(POLL_S, mean search time / SLEEP_DIV)
between reads: fewer wake-ups, and the engines still never run dry (two searches queued)."""


@dataclass
class _Flight:
    """A job whose commands the engine has been sent."""

    job: Job
    state: SearchState
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

    Each position's output opens with its fence (see `position_commands`), so a reply is
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
                check_kept_fence(self.slots[0].engine)
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
        return f"engine {verb} ({how})" + (f"; its last line {excerpt(tail)}" if tail else "; no reply to this search")

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
            commands, fence = position_commands(job.fen, self._limit, self.clear_hash)
            slot.inflight.append(_Flight(job, SearchState(fence, static_eval=self._limit.kind == "static")))
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
