"""A night's time budget for `chess-pipeline reproduce --hours H`: each model run's share of it.

The rule (simple enough to check by hand in the report):

1. The budget is H hours of run time, counted from the command's start (and over every command
   that goes on with it, rule 5). Ingest, labels and the datasets run first and are not cut;
   their measured time is taken off the budget.
2. Of what is left when the first model starts, TRAIN_SHARE (three quarters) is training time;
   the rest is kept for the evaluation and the report, which are not cut either (the report
   states the whole run's time against the budget).
3. Each model run, as it starts, gets an equal part of the training time still left: that time
   divided by the model runs still to come that will train (not kept as up to date, not skipped
   after an upstream failure), itself included, less the mean time the finished
   runs took beyond their shares (loading the splits, the final test pass, Dagster's own run:
   outside a training's bound, but inside the budget). Were every run to use its whole share,
   that is an even split of the training time; a run that stops early leaves its time to the
   runs after it.
4. A share below MIN_MINUTES is raised to it (a model needs some steps to be a model); the
   budget is then overrun, and the report says by how much.

5. The budget outlives the command (BudgetLedger, `reproduction/budget-<settings>.json` in the
   store): a command killed, or ended with failed steps, and run again with the same settings
   goes on with it, counting the time each command ran (not the time between them) and keeping
   the training pool and shares already fixed. A command that ends with every step done closes
   it, and the next starts a new one; so does `--new-budget`.

A run's share is its training's `max_minutes` (training.train.TrainConfig: pretraining gets at
most half of it, PRETRAIN_SHARE), or the profile's own bound where that is smaller; training
stops there and the run's metadata and the report say so. Nothing here knows Dagster or torch.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.storage import StorePath

TRAIN_SHARE = 0.75
"""The share of the budget left after ingest, labels and datasets that the model runs train in."""
MIN_MINUTES = 1.0
"""The least a model run is given, budget or not (the report then states the overrun)."""


@dataclass
class TimeBudget:
    hours: float
    """The budget in hours of run time (> 0): the command's, and its re-runs' (BudgetLedger)."""
    train_share: float = TRAIN_SHARE
    """The share of what is left when training starts that the model runs get."""
    training_from: float | None = None
    """Seconds since the command's start when the first model run started (None: not yet)."""
    training_seconds: float = 0.0
    """The model runs' time, fixed when the first one starts."""
    shares: dict[str, float] = field(default_factory=dict)
    """model run -> the minutes it was given."""
    overheads: list[float] = field(default_factory=list)
    """Seconds each finished run took beyond its share (finished)."""

    def __post_init__(self):
        if not (math.isfinite(self.hours) and self.hours > 0):
            raise ValueError(f"a time budget needs a positive number of hours, got {self.hours}")
        if not 0 < self.train_share <= 1:
            raise ValueError(f"the training share must be in (0, 1], got {self.train_share}")

    @property
    def seconds(self) -> float:
        return self.hours * 3600

    def model_minutes(self, run: str, elapsed: float, runs_left: int) -> float:
        """The minutes model run `run` may train, starting `elapsed` seconds after the command
        started, with `runs_left` model runs still to come (itself included)."""
        if self.training_from is None:
            self.training_from = elapsed
            self.training_seconds = max(self.seconds - elapsed, 0.0) * self.train_share
        left = self.training_seconds - (elapsed - self.training_from)
        overhead = sum(self.overheads) / len(self.overheads) if self.overheads else 0.0
        minutes = max((left / max(runs_left, 1) - overhead) / 60, MIN_MINUTES)
        self.shares[run] = round(minutes, 2)
        return self.shares[run]

    def finished(self, run: str, seconds: float) -> None:
        """Model run `run` took `seconds` in all: what it took beyond its share is expected of the
        runs after it too."""
        self.overheads.append(max(seconds - self.shares[run] * 60, 0.0))

    def text(self, elapsed: float | None = None) -> str:
        """The budget, the rule and (with `elapsed`, seconds since the start) where the run stands."""
        out = (
            f"{self.hours:g} h for the whole command; each model run trains at most an equal part of the "
            f"training time still left when it starts ({self.train_share:.0%} of the budget left after ingest, "
            f"labels and datasets, less the mean time a finished run took beyond its share; at least "
            f"{MIN_MINUTES:g} min a run); ingest, labels, datasets and the evaluation are not cut"
        )
        if self.training_from is not None:
            out += (
                f"; training started {self.training_from / 60:.1f} min in, with {self.training_seconds / 60:.1f} min "
                f"for {len(self.shares)} model run(s)"
            )
            if self.overheads:
                out += f" (each took {sum(self.overheads) / len(self.overheads):.0f} s beyond its share on average)"
        if elapsed is not None:
            over = elapsed - self.seconds
            verdict = f"over the budget by {over / 60:.1f} min" if over > 0 else "within the budget"
            out += f"; {elapsed / 60:.1f} min when the report was written: {verdict}"
        return out


LEDGER_DIR = "reproduction"
"""Where in the store the budgets are kept between commands (BudgetLedger), a file per settings."""
LEDGER_VERSION = 1
HEARTBEAT_S = 30.0
"""How often a running command writes what it has spent: a killed command loses at most this."""


def ledger_name(key: str) -> str:
    """The ledger file of the settings `key` (one per settings: another command never replaces it)."""
    return f"budget-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


class BudgetLedger:
    """A time budget that outlives the command spending it (rule 5): the seconds every command
    with the same settings has run, and the budget's state (training pool, shares, overheads).

    `open` continues the ledger at `path` when a command with the same `key` wrote it and did not
    finish, else starts a new one. `save` writes it atomically (after each step, and every
    HEARTBEAT_S from `heartbeat`), so a command killed at any point has its time counted to
    within HEARTBEAT_S; `save(finished=True)` closes it. Changes of the budget go through
    `changing()`, so a heartbeat never saves one half made."""

    def __init__(self, path: StorePath, key: str, budget: TimeBudget, spent_before: float = 0.0, commands: int = 1):
        self.path = path
        self.key = key
        self.budget = budget
        self.spent_before = spent_before
        """Seconds the earlier commands of this budget ran."""
        self.commands = commands
        """The commands that have run this budget, this one included."""
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.save_error: str = ""
        """Why the last save failed ('' when it did not): the command goes on, the ledger is behind."""

    @classmethod
    def open(cls, path: StorePath, key: str, hours: float, new: bool = False) -> BudgetLedger:
        """The ledger of `key` at `path`: continued when open (not finished), else (or with `new`) a new one."""
        from pipeline.store import read_json

        data = {} if new else read_json(path)
        if data.get("version") != LEDGER_VERSION or data.get("key") != key or data.get("finished"):
            return cls(path, key, TimeBudget(hours))
        b = data["budget"]
        budget = TimeBudget(
            hours=b["hours"],
            train_share=b["train_share"],
            training_from=b["training_from"],
            training_seconds=b["training_seconds"],
            shares=dict(b["shares"]),
            overheads=list(b["overheads"]),
        )
        return cls(path, key, budget, float(data["spent_s"]), int(data["commands"]) + 1)

    def elapsed(self) -> float:
        """Seconds this budget has run: the earlier commands' and this one's so far."""
        return self.spent_before + time.monotonic() - self.started

    def changing(self):
        """Hold while changing the budget (TimeBudget.model_minutes, finished): no save sees it half made."""
        return self._lock

    def save(self, finished: bool = False) -> bool:
        """Write the ledger; False (and `save_error`) when the store refused it: the spending goes on,
        a re-run would count less of it, so the caller says so rather than stopping the command."""
        from pipeline.store import write_json

        with self._lock:  # a heartbeat's write never lands after a newer one, nor mid-change
            b = self.budget
            data = {
                "version": LEDGER_VERSION,
                "key": self.key,
                "spent_s": round(self.elapsed(), 3),
                "commands": self.commands,
                "finished": finished,
                "budget": {
                    "hours": b.hours,
                    "train_share": b.train_share,
                    "training_from": b.training_from,
                    "training_seconds": b.training_seconds,
                    "shares": dict(b.shares),
                    "overheads": list(b.overheads),
                },
            }
            try:
                write_json(self.path, data)
            except Exception as e:  # noqa: BLE001 - bookkeeping: never the reason a night's run stops
                self.save_error = f"{type(e).__name__}: {e}"
                return False
            self.save_error = ""
            return True

    @contextmanager
    def heartbeat(self, every_s: float = HEARTBEAT_S, warn=None):
        """Save every `every_s` seconds while the block runs (a daemon thread); `warn` is told
        (once until a save works again) when a save fails."""
        stop = threading.Event()

        def beat():
            warned = False
            while not stop.wait(every_s):
                if self.save():
                    warned = False
                elif not warned and warn is not None:
                    warn(f"the time budget's ledger {self.path} could not be saved ({self.save_error})")
                    warned = True

        thread = threading.Thread(target=beat, name="budget-ledger", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
