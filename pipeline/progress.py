"""Progress of long work, reported one way by ingest, labelling and evaluation.

Each of them counts work done against the work asked for and says so in two places: a log
line (the Dagster run's log, through the log function the asset passes) at most every
LOG_EVERY_S seconds and once at the end, and, when the command line asked for it, a small JSON
file rewritten at most every WRITE_EVERY_S seconds, which the CLI's bar polls. The throttle,
the rate, the ETA and the file format live here, once; no Dagster (the assets pass
`context.log.info`, the CLI reads the file with `read_progress_file`).
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.store.store_files import atomic_path

LOG_EVERY_S = 10.0
"""A progress line in the run's log at most this often (and one at the end)."""
WRITE_EVERY_S = 0.5
"""The progress file is rewritten at most this often (the CLI's bar polls it as often)."""


class Throttle:
    """True at most once every `every_s` seconds, counted from its creation (or when forced)."""

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic):
        self.every_s, self.clock = every_s, clock
        self.last = clock()

    def due(self, force: bool = False) -> bool:
        now = self.clock()
        if force or now - self.last >= self.every_s:
            self.last = now
            return True
        return False


def format_eta(seconds: float | None) -> str:
    """'?' (not known yet), '4m05s' or '2h07m'."""
    if seconds is None:
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def format_rate(per_second: float) -> str:
    """'12.5' below 100 a second, '1,234' from there."""
    return f"{per_second:,.0f}" if per_second >= 100 else f"{per_second:.1f}"


def eta_seconds(handled: int, total: int, rate: float, budget_left_s: float | None = None) -> float | None:
    """Seconds until `total` at `rate` (items handled a second); None while the total or the
    rate is unknown; never beyond the end of a time budget."""
    if total <= 0 or rate <= 0:
        return None
    eta = max(0, total - handled) / rate
    return eta if budget_left_s is None else min(eta, max(0.0, budget_left_s))


@dataclass(frozen=True)
class Counts:
    """What the progress file holds: items done, failed, and the total asked for (0: unknown)."""

    done: int
    failed: int = 0
    total: int = 0

    @property
    def handled(self) -> int:
        return self.done + self.failed


def write_progress_file(path: Path, counts: Counts) -> None:
    """The progress file the CLI's bar reads, written atomically (a reader never sees half)."""
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(json.dumps({"done": counts.done, "failed": counts.failed, "total": counts.total}))


def read_progress_file(path: Path) -> Counts | None:
    """The counts in a progress file; None while it is not written yet (or not one)."""
    try:
        d = json.loads(Path(path).read_text())
        return Counts(int(d["done"]), int(d["failed"]), int(d["total"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


class Progress:
    """Work counted against the work asked for: a log line at most every `log_every_s` (and
    when the total is reached or the caller says it is the last report), the progress file
    (when a path is given) at most every `write_every_s`.

    The line: "1,234 of 5,000 positions done (1,200 labelled, 34 failed), 95.2 positions/s,
    ETA 0m39s (shard 03)"; without a total (not known yet): "1,234 games done, 95.2 games/s".
    """

    def __init__(
        self,
        what: str,
        total: int = 0,
        *,
        log: Callable[[str], None] | None = None,
        file: str | Path | None = None,
        log_every_s: float = LOG_EVERY_S,
        write_every_s: float = WRITE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.total, self.log, self.clock = what, total, log, clock
        self.file = Path(file) if file else None
        self.done = self.failed = 0
        self.start = clock()
        self.budget_left_s: float | None = None
        self._log_throttle = Throttle(log_every_s, clock)
        self._write_throttle = Throttle(write_every_s, clock)

    @property
    def handled(self) -> int:
        return self.done + self.failed

    @property
    def seconds(self) -> float:
        return self.clock() - self.start

    @property
    def rate(self) -> float:
        """Items handled a second since the start."""
        seconds = self.seconds
        return self.handled / seconds if seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        return eta_seconds(self.handled, self.total, self.rate, self.budget_left_s)

    def line(self, detail: str = "", suffix: str = "") -> str:
        """The log line; detail goes after "done" (e.g. " (12 labelled, 1 failed)"), suffix at the end."""
        rate = f"{format_rate(self.rate)} {self.what}/s"
        if self.total > 0:
            return (
                f"{self.handled:,} of {self.total:,} {self.what} done{detail}, {rate}, "
                f"ETA {format_eta(self.eta_seconds)}{suffix}"
            )
        return f"{self.handled:,} {self.what} done{detail}, {rate}{suffix}"

    def update(
        self,
        done: int,
        failed: int = 0,
        total: int | None = None,
        *,
        detail: str = "",
        suffix: str = "",
        budget_left_s: float | None = None,
        final: bool = False,
    ) -> None:
        """Counts so far (not increments); total None keeps the one known."""
        self.done, self.failed = done, failed
        if total is not None:
            self.total = total
        self.budget_left_s = budget_left_s
        final = final or (self.total > 0 and self.handled >= self.total)
        if self.log is not None and self._log_throttle.due(force=final):
            self.log(self.line(detail, suffix))
        if self.file is not None and self._write_throttle.due(force=final):
            write_progress_file(self.file, Counts(self.done, self.failed, self.total))

    def set(self, done: int, total: int | None = None) -> None:
        """Callback form (done, total so far): what the evaluation loops call."""
        self.update(done, self.failed, total or None)

    def step(self, n: int = 1) -> None:
        """Callback form: n more items done."""
        self.update(self.done + n, self.failed)
