"""How long a search may take before it is stopped: search_timeout measures the limit on a few
positions (CALIBRATION_FENS) on the pool's own engines and allows TIMEOUT_MULTIPLE times the
slowest, never less than TIMEOUT_FLOOR_S; an engine that fails those searches cannot label.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pipeline.labels.engine import EngineError
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Evaluation, Job, Limit

TIMEOUT_FLOOR_S = 2.0
"""No search is given less than this: a depth-8 search or a static eval takes milliseconds,
and a loaded machine can stretch those tenfold without anything being wrong."""
TIMEOUT_MULTIPLE = 20
"""A search may take this many times the slowest calibration search before it is stopped."""
CALIBRATION_TIMEOUT_S = 60.0
"""Timeout of each calibration search itself, never the run's: a run's timeout is measured from
the calibration searches that finished (search_timeout)."""
CALIBRATION_FAILURES_PASSED_OVER = 1
"""Calibration searches that may fail (a crash, a malformed reply, a hang) and be passed over,
the timeout measured from the others; one more and the engine is refused."""
CALIBRATION_FENS = (
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 1",
    "8/5pk1/6p1/8/3R4/6P1/5PKP/3r4 w - - 0 1",
)
"""Opening, a sharp middlegame (Kiwipete), a quiet middlegame and a rook endgame."""


@dataclass(frozen=True)
class SearchTimeout:
    seconds: float
    """The timeout to label with."""
    measured_s: float
    """The slowest calibration search that finished."""
    how: str
    failed: tuple[str, ...] = ()
    """Why each calibration search that failed (and was passed over) failed."""

    def __str__(self) -> str:
        return f"{self.seconds:g}s ({self.how})"


def search_timeout(pool: EnginePool, limit: Limit) -> SearchTimeout:
    """A timeout for searches under `limit` on this pool's engines, measured: the limit is run
    on CALIBRATION_FENS one at a time (each bounded by CALIBRATION_TIMEOUT_S, no retry), and a
    search may take TIMEOUT_MULTIPLE times the slowest of them, never less than TIMEOUT_FLOOR_S.
    A calibration search that fails is passed over (its reason in `how`), so the timeout is still
    measured from the others; more than CALIBRATION_FAILURES_PASSED_OVER failures raise
    EngineError: an engine that fails those searches cannot label. The pool's own timeout and
    retries are left as they were."""
    timeout, retries = pool.timeout_s, pool.retries
    pool.timeout_s, pool.retries = CALIBRATION_TIMEOUT_S, 0
    times: list[float] = []
    failed: list[str] = []
    try:
        for i, fen in enumerate(CALIBRATION_FENS):
            start = time.monotonic()
            results = list(pool.run([Job(("calibration", i), fen, fen.split()[1] == "w")], limit))
            if results and all(isinstance(r, Evaluation) for r in results):
                times.append(time.monotonic() - start)
                continue
            failed.append(re.sub(r"; \d+ tries$", "", results[0].reason) if results else "no result")
            if len(failed) > CALIBRATION_FAILURES_PASSED_OVER:
                break
    finally:
        pool.timeout_s, pool.retries = timeout, retries
    if len(failed) > CALIBRATION_FAILURES_PASSED_OVER or not times:
        raise EngineError(
            f"{pool.name or pool.path} failed {len(failed)} of {len(failed) + len(times)} calibration searches "
            f"({limit}): {' | '.join(failed)}; check the engine (the stockfish path), or give a search timeout "
            "(`label --timeout SECONDS`, the stockfish resource's timeout_s) to label without calibrating"
        )
    slowest = max(times)
    seconds = max(TIMEOUT_FLOOR_S, round(TIMEOUT_MULTIPLE * slowest, 1))
    how = (
        f"{TIMEOUT_MULTIPLE} x the slowest of {len(times)} calibration searches, {slowest * 1000:,.0f} ms"
        + (f"; floor {TIMEOUT_FLOOR_S:g}s" if seconds == TIMEOUT_FLOOR_S else "")
        + "".join(f"; a calibration search failed, passed over: {why}" for why in failed)
    )
    return SearchTimeout(seconds, slowest, how, tuple(failed))
