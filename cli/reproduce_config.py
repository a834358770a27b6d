"""What a `chess-pipeline reproduce` command is set to, and what that means for each step.

ReproduceConfig (the command's settings, from which its flags are derived); settings_text, the
settings each kind of step (STEP_KINDS) is kept under; and each model's resolved schedule under
the command's caps and its share of the time budget (train_run, schedule_text, bounds_text).
The command's flags are in cli/reproduce.py, the step loop in cli/reproduce_steps.py, the whole
run in cli/reproduce_run.py.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from cli.flags import SHARED_EPD, SHARED_PGN
from pipeline.labels.uci import Limit
from pipeline.research.published import OptionalStage
from training.choices import Profile
from training.config import ScheduleOverrides


@dataclass(frozen=True)
class ReproduceConfig:
    data: str = str(SHARED_PGN)
    """Folder of the archives to reproduce on (read in place, linked into the store)."""
    archives: str = "*"
    """Only the archives whose path under the data folder matches this glob (e.g. 'ficsgamesdb_2024*')."""
    suites: str = str(SHARED_EPD)
    """Folder of the EPD suites (STS, Kaufman)."""
    models: tuple[str, ...] = ()
    """Model assets to reproduce (empty: those with a published figure; with --with ours, every model but
    those on a set of ours with no published counterpart: mlp_search_regression, mlp_bitmap_3class_search and
    deepchess_scored_net)."""
    with_stages: tuple[OptionalStage, ...] = ()
    """Optional stages beyond the published figures (--with STAGE, repeatable): ours, the project's own
    measures (the matches, head to head and Elo, each model's evaluation page, the suites at depth 2, the TD
    line's match against the traditional evaluation, the models with no published figure)."""
    profile: Profile = "full"
    """Training profile: full (the published schedules) or quick (a few CPU minutes a model)."""
    label: Limit = Limit()
    """The label setting (--depth N, --nodes N, or --static: Stockfish's static evaluation, for a fast,
    small run); reproducible: a fresh hash for every position."""
    caps: ScheduleOverrides = ScheduleOverrides()
    """Bounds on every model's schedule (--max-epochs N, --max-train-rows N: ScheduleOverrides' epochs and
    max_train_rows), each a cap: a model gets the smaller of its profile's and this, never more; stated in
    the report."""
    hours: float = 0.0
    """Time budget in hours of run time (0: none): each model run trains at most an equal share of the
    training time left (pipeline.research.budget: what ingest, labels and datasets leave, less the evaluation's
    measured time), below its profile's bound; the report says where each model's training stopped. A
    command killed, or ended with failed steps, and run again with the same settings goes on with its budget."""
    new_budget: bool = False
    """With --hours: start a new time budget even where an earlier command with these settings left one open."""
    quick_eval: bool = False
    """The evaluation's quick settings (evaluate --quick: fewer suite positions at 1 ply, fewer openings, a
    small Lubeck grid)."""
    openings: int = 0
    """Openings per match, each played with both colours (0: the evaluation's; --quick-eval's fewer)."""
    workers: int = 0
    """Worker processes of ingest, engines of labels, processes of the evaluation's suite searches and match
    games (0: one per core)."""


STEP_KINDS = ("dataset", "model", "evaluation", "selfplay")
"""What a reproduce step makes, which decides the settings it is kept under (settings_text)."""


def settings_text(cfg: ReproduceConfig, kind: str) -> str:
    """The settings that decide what a step of this kind (STEP_KINDS) holds: a change of them
    redoes those steps, and what is downstream of them through their inputs' changes; a change of
    another kind's settings keeps them (a new --hours retrains, and keeps the datasets)."""
    label = cfg.label.slug
    if kind == "dataset":
        return f"labels={label}"
    if kind == "model":
        return (f"profile={cfg.profile} labels={label} {caps_text(cfg.caps)}") + (
            f" hours={cfg.hours:g}" if cfg.hours else ""
        )  # a budget changes what a model holds
    if kind == "evaluation":
        suites = Path(cfg.suites).expanduser().resolve()
        stages = f" with={','.join(cfg.with_stages)}" if cfg.with_stages else ""  # ours: deeper suites
        return f"eval={'quick' if cfg.quick_eval else 'full'} openings={cfg.openings} suites={suites}{stages}"
    if kind == "selfplay":  # the TD line's own settings only: another evaluation setting never plays it on
        return f"td={'quick' if cfg.quick_eval else 'full'}"
    raise ValueError(f"step kind must be one of {STEP_KINDS}, got {kind!r}")


def caps_text(caps: ScheduleOverrides) -> str:
    """The caps as a settings text: no cap written as before ScheduleOverrides (max_epochs=0, max_train_rows=-1),
    so a store's reproduce runs made then are kept; 0 train rows (no cap) the same as none."""
    return f"max_epochs={caps.epochs or 0} max_train_rows={caps.max_train_rows or -1}"


def step_kind(name: str) -> str:
    """The kind (STEP_KINDS) of the reproduction job's step `name`."""
    from assets.training import MODELS
    from pipeline.datasets.datasets import DATASETS
    from pipeline.research.reproduction import PUBLISHED_SPLIT

    base = name.removeprefix(PUBLISHED_SPLIT)
    if base in DATASETS:
        return "dataset"
    if base in MODELS or name == "model_results":
        return "model"
    return "selfplay" if name == "td_selfplay" else "evaluation"


def bounds_text(cfg: ReproduceConfig) -> str:
    """The run's bounds below the profile, in words (each model's resolved schedule: schedule_text)."""
    parts = []
    if cfg.caps.epochs:
        parts.append(f"at most {cfg.caps.epochs} epoch(s)")
    if cfg.caps.max_train_rows:
        parts.append(f"at most {cfg.caps.max_train_rows:,} train rows")
    if cfg.hours:
        parts.append(f"a time budget of {cfg.hours:g} h (each model run's share: where its training stopped, below)")
    return "; ".join(parts) or "none"


def train_run(cfg: ReproduceConfig, model: str, minutes: float = 0.0):
    """A model's TrainRunConfig: its profile's schedule (PROFILES and the model's own) under
    cfg.caps (ScheduleOverrides.cap: the smaller of the two, never raising it); `minutes` (> 0):
    its share of the time budget, a cap on the profile's max_minutes likewise. A field not capped
    is left out (the profile's)."""
    from assets.training import TrainRunConfig
    from training.catalog import schedule

    caps = dataclasses.replace(cfg.caps, max_minutes=minutes if minutes > 0 else None)
    capped = caps.cap(schedule(model, cfg.profile))
    return TrainRunConfig(profile=cfg.profile, device="auto", **{name: capped[name] for name in caps.given()})


def schedule_text(cfg: ReproduceConfig, model: str, minutes: float = 0.0) -> str:
    """A model's resolved schedule in words ('quick profile: at most 200,000 train rows, 4 epochs, 3 minutes');
    `minutes`: its share of the time budget (train_run)."""
    from assets.training import train_config

    t = train_config(model, train_run(cfg, model, minutes), "", "")
    rows = f"at most {t.max_train_rows:,} train rows" if t.max_train_rows else "every train row"
    limit = f", {t.max_minutes:g} minutes" if t.max_minutes else ""
    if minutes > 0:  # the run's share of --hours, or the profile's own bound where that is smaller
        own = t.max_minutes == minutes
        limit += " (its time budget share)" if own else f" (below its time budget share {minutes:g} min)"
    return f"{cfg.profile} profile: {rows}, at most {t.epochs} epoch(s){limit}"
