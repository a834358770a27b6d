"""A night's time budget for `chess-pipeline reproduce --hours H`: each model run's share of it.

The rule (simple enough to check by hand in the report):

1. The budget is H hours of run time, counted from the command's start (and over every command
   that goes on with it, rule 5). Ingest, labels and the datasets run first and are not cut;
   their measured time is taken off the budget.
2. When the first model run starts, the evaluation and the report that come after training
   (not cut either: the report states the whole run's time against the budget) are set aside,
   as measured: each of those steps is reserved the time it took when this store last ran it
   with the same evaluation settings, else the time its kind of step took on this 2-core
   machine (EVALUATION_SECONDS, measured: README, Reproducing). The rest is training time.
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
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pipeline.store.storage_paths import StorePath

Evaluation = Literal["quick", "full", "ours"]
"""The reproduction's evaluation settings: `--quick-eval`; the full evaluation of the published
figures (the default: suites at 1 ply); or the full evaluation with the optional stage `ours`
(`--with ours`: suites at depths 1 and 2, the matches, head to head, Elo)."""


EVALUATION_TEXT: dict[Evaluation, str] = {
    "quick": "quick evaluation",
    "full": "full evaluation",
    "ours": "full evaluation with the stage ours",
}


def evaluation_of(quick: bool, stages: tuple[str, ...]) -> Evaluation:
    """Which of EVALUATION_SECONDS' settings a reproduction's flags (--quick-eval, --with) ask for."""
    return "quick" if quick else "ours" if "ours" in stages else "full"


_FULL: dict[str, float] = {
    "model_results": 0.4,
    "eval_suites_": 17.3,
    "eval_matches_": 489.2,
    "eval_pairs_": 4.3,
    "eval_piece_values_": 16.9,
    "eval_head_to_head": 37.8,
    "elo_ratings": 1.0,
    "eval_report_": 0.4,
    "td_selfplay": 108.1,
    "td_evaluation": 185.2,
    "lubeck_grid": 937.5,
    "reproduction_report": 1.8,
}

EVALUATION_SECONDS: dict[Evaluation, dict[str, float]] = {
    "quick": {
        "model_results": 0.3,
        "eval_suites_": 5.0,
        "eval_matches_": 48.6,
        "eval_pairs_": 7.5,
        "eval_piece_values_": 4.0,
        "eval_head_to_head": 5.7,
        "elo_ratings": 1.2,
        "eval_report_": 0.5,
        "td_selfplay": 8.0,
        "td_evaluation": 15.0,
        "lubeck_grid": 9.5,
        "reproduction_report": 3.8,
    },
    "full": _FULL,
    "ours": {**_FULL, "eval_suites_": 231.0},
}
"""Seconds a step after training took on this 2-core machine, by evaluation (Evaluation)
and kind of step (a name, or the prefix of a model's step): what the reserve (rule 2) counts
for a step the store has not timed with the same settings. Measured on the store of every
shared archive (README, Reproducing), the suites' searches and the matches' games in two
processes (the evaluation's default on 2 cores):

- quick: the means over the 15 models of `reproduce --hours 2 --quick-eval`'s steps (one
  process, load 3 to 5); the matches times 25.1 / 37.7 (1.50x), what two processes made of
  mlp_bitmap_3class's quick matches, idle; the quick suites stay in one
  process (QUICK_EVALUATION);
- full: the steps of `reproduce --hours 2.5` on a fresh store of every shared archive, the
  machine otherwise idle (docs/results/reproduction.md, "One sitting"), each the time the command
  printed for it: the 12 suites steps at 1 ply 11.7 to 34.6 s, 17.3 s on average (the first
  searches Kaufman's scale once a store); DeepChess's pairs 4.4 and 4.2 s; the piece values over
  every test row 16.7 and 17.1 s; Hui's TD learner (assets.reproduce.TD_LINE, TD_CHECK: 8
  generations of 20 self-play games at depth 2, then 10 batches of 100 games against the random
  mover) 108.1 and 185.2 s; Lubeck's default grid (16 start positions of each kind: 576 games,
  two processes) 937.5 s; model_results and the report under 2 s. These replace figures measured
  under load (load average 3 to 6: the grid 4,400 s, Hui's check 640 s), which set aside 94.8
  minutes where that run's evaluation took 24.7;
- ours: as full, but the suites at depths 1 and 2 (`evaluate --suites`, idle): mlp_bitmap_3class
  133.5 s and cnn_features_15class 499.2 s, counted as 11 models like the first and the 4 CNNs
  like the second (231 s);
- ours, the steps only it runs: the matches, the one-process mean at load 4 to 5 (856 s: the
  quick mean, 73.4 s, times the mean full/quick ratio, 11.66, of the four models timed both
  ways, 287 to 1,672 s, the CNNs slowest) times 159.8 / 279.6 (1.75x), what two processes made
  of mlp_bitmap_3class's full matches, idle; the head-to-head, Elo and report steps of the
  one-process runs (they play or compute in one);
- quick, Hui's TD learner: a generation of 20 self-play games at depth 2 took 21.2 s and a batch
  of 100 games against the random mover 63.8 s (two processes at load 3.6 to 6.5); the quick
  line (one generation of 4 games) and check (2 x 10 games) scaled from those."""
MIN_MINUTES = 1.0
"""The least a model run is given, budget or not (the report then states the overrun)."""


def figure_for(name: str, figures: dict[str, float]) -> str:
    """The entry of `figures` (EVALUATION_SECONDS[...]) for step `name`: its own name, or the
    longest prefix of it; ValueError for a step no figure covers (a new kind of step needs one)."""
    if name in figures:
        return name
    prefixes = [k for k in figures if k.endswith("_") and name.startswith(k)]
    if not prefixes:
        raise ValueError(f"no measured time for the step {name!r} (pipeline.research.budget.EVALUATION_SECONDS)")
    return max(prefixes, key=len)


@dataclass(frozen=True)
class Reserve:
    """The time set aside for the steps after training (rule 2)."""

    seconds: float
    steps: int
    """Steps reserved for."""
    timed: int
    """Of them, those reserved what this store measured (the rest: EVALUATION_SECONDS)."""
    evaluation: Evaluation = "full"

    def text(self) -> str:
        return (
            f"{self.seconds / 60:.1f} min set aside for the {self.steps} steps after training "
            f"({EVALUATION_TEXT[self.evaluation]}; {self.timed} timed by this store's earlier runs, "
            f"{self.steps - self.timed} at this machine's measured figures)"
        )


def evaluation_reserve(steps: list[str], timed: dict[str, float], evaluation: Evaluation) -> Reserve:
    """Rule 2: the seconds to set aside for `steps` (those after training), each the time this
    store measured for it (`timed`: step -> seconds, with the same evaluation settings), else its
    kind's figure for `evaluation` (evaluation_of) in EVALUATION_SECONDS."""
    figures = EVALUATION_SECONDS[evaluation]
    seconds = sum(timed[n] if n in timed else figures[figure_for(n, figures)] for n in steps)
    return Reserve(seconds, len(steps), sum(n in timed for n in steps), evaluation)


@dataclass
class TimeBudget:
    hours: float
    """The budget in hours of run time (> 0): the command's, and its re-runs' (BudgetLedger)."""
    reserve_seconds: float = 0.0
    """The time set aside for the steps after training (rule 2), fixed when the first model run starts."""
    reserve_text: str = ""
    """How that reserve was made (Reserve.text)."""
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

    @property
    def seconds(self) -> float:
        return self.hours * 3600

    def model_minutes(self, run: str, elapsed: float, runs_left: int, reserve: Reserve | None = None) -> float:
        """The minutes model run `run` may train, starting `elapsed` seconds after the command
        started, with `runs_left` model runs still to come (itself included). `reserve`: the
        steps after training, set aside when the first run starts (later ones keep that)."""
        if self.training_from is None:
            self.training_from = elapsed
            if reserve is not None:
                self.reserve_seconds, self.reserve_text = reserve.seconds, reserve.text()
            self.training_seconds = max(self.seconds - elapsed - self.reserve_seconds, 0.0)
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
            f"training time still left when it starts (what ingest, labels and datasets leave, less the time "
            f"set aside for the evaluation as measured, less the mean time a finished run took beyond its share; "
            f"at least {MIN_MINUTES:g} min a run); ingest, labels, datasets and the evaluation are not cut"
        )
        if self.training_from is not None:
            out += (
                f"; training started {self.training_from / 60:.1f} min in, with {self.training_seconds / 60:.1f} min "
                f"for {len(self.shares)} model run(s)"
            )
            if self.reserve_text:
                out += f" and {self.reserve_text}"
            if self.overheads:
                out += f" (each took {sum(self.overheads) / len(self.overheads):.0f} s beyond its share on average)"
        if elapsed is not None:
            over = elapsed - self.seconds
            verdict = f"over the budget by {over / 60:.1f} min" if over > 0 else "within the budget"
            out += f"; {elapsed / 60:.1f} min when the report was written: {verdict}"
        return out


LEDGER_DIR = "reproduction"
"""Where in the store the budgets are kept between commands (BudgetLedger), a file per settings."""
LEDGER_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Ledgers a command goes on with: version 1's open budgets (before the reserve) are not lost."""
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
        from pipeline.store.store_files import read_json

        data = {} if new else read_json(path)
        if data.get("version") not in READABLE_VERSIONS or data.get("key") != key or data.get("finished"):
            return cls(path, key, TimeBudget(hours))
        b = data["budget"]
        budget = TimeBudget(
            hours=b["hours"],
            # Version 1 (a fixed training share) had no reserve: its pool, once fixed, stands.
            reserve_seconds=b.get("reserve_seconds", 0.0),
            reserve_text=b.get("reserve_text", ""),
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
        from pipeline.store.store_files import write_json

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
                    "reserve_seconds": b.reserve_seconds,
                    "reserve_text": b.reserve_text,
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
