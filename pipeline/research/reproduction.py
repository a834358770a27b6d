"""The reproduction report: every published figure beside ours, the step times, the pictures.

Pure rendering: the caller (assets/reproduce.py) gathers the figures, our values, the sizes
trained and the step times; this module only reads the store's metric views and writes
Markdown. No Dagster, no torch.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.research.intervals import interval_text
from pipeline.research.published import PAIRS_ON_PUBLISHED_SPLIT, Figure, fmt

PUBLISHED_SPLIT = "published_split_"
"""Prefix of the reproduction's copies of a dataset or model on the published protocol
(positions split one by one, no leakage guard)."""


def on_published_split(name: str) -> str:
    """The asset (and model_metrics model) of a dataset or model's published-split copy."""
    return PUBLISHED_SPLIT + name


@dataclass(frozen=True)
class Ours:
    value: float
    n: int | None
    """Positions, pairs, games or suite positions the value was measured on (None: not recorded)."""
    interval: tuple[float, float] | None = None
    """Its 95% interval where the store holds one (<metric>_low95 / _high95 rows: Kaufman's delta,
    DeepChess's buckets and pair accuracies, STS points, piece values, match scores;
    pipeline.research.intervals)."""


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float | None
    """Wall time of the step (Dagster's step stats); None when not materialised."""
    status: str
    """done (this run), kept (an earlier run's, up to date), failed, skipped (this run's); else
    materialised or missing (its latest materialisation, for a step the run did not name)."""
    detail: str = ""


@dataclass
class ReportInputs:
    figures: list[Figure]
    ours: dict[tuple, Ours]
    """(model, table, where, metric) -> our value; model may be its on_published_split copy."""
    sizes: dict[str, str]
    """model -> what it was trained on and how (rows, epochs, profile, a stated bound)."""
    steps: list[Step]
    settings: dict[str, str]
    """What the run was asked for (archives, labels, profile, models, evaluation)."""
    pictures: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """model -> [(caption, path relative to the report)]."""
    kaufman_tables: dict[str, str] = field(default_factory=dict)
    """model -> its per-position Kaufman table (Markdown, from eval_suites_<model>)."""
    lubeck_grid: str = ""
    """The link to Lubeck's grid report, or why it is absent."""
    stops: dict[str, str] = field(default_factory=dict)
    """model run (a model or its published-split copy) -> what it was trained on, the epochs done of
    those asked and why it stopped (every epoch, early stopping, the time budget), and its schedule."""


def ours_from_store(con, figures: Iterable[Figure], models: Iterable[str]) -> dict[tuple, Ours]:
    """Our value for each figure's (model, table, where, metric), for each model name given (a
    model and its published-split copy): model_metrics of the model's newest run (n: that split's
    `rows`), evaluation_results' newest rows (n: their own); the interval from the
    `<metric>_low95` / `_high95` rows beside a figure in either (DeepChess's pair accuracies:
    clustered by game)."""
    out: dict[tuple, Ours] = {}
    wanted = list(figures)
    names = list(models)
    metrics = con.sql(
        "SELECT model, split, metric, value FROM model_metrics "
        "QUALIFY materialised_at = max(materialised_at) OVER (PARTITION BY model)"
    ).fetchall()
    got = {(m, s, k): v for m, s, k, v in metrics}
    results = con.sql("SELECT model, suite, metric, value, n FROM evaluation_results").fetchall()
    evals = {(m, s, k): (v, n) for m, s, k, v, n in results}
    for f in wanted:
        for model in names:
            if model not in (f.model, on_published_split(f.model)):
                continue
            if f.table == "model_metrics":
                v = got.get((model, f.where, f.metric))
                if v is not None:
                    rows = got.get((model, f.where, "rows"))
                    low, high = (got.get((model, f.where, f"{f.metric}_{end}95")) for end in ("low", "high"))
                    out[(model, f.table, f.where, f.metric)] = Ours(
                        v,
                        None if rows is None else int(rows),
                        None if low is None or high is None else (low, high),
                    )
            else:
                hit = evals.get((model, f.where, f.metric))
                if hit is not None:
                    low, high = (evals.get((model, f.where, f"{f.metric}_{end}95")) for end in ("low", "high"))
                    out[(model, f.table, f.where, f.metric)] = Ours(
                        hit[0],
                        None if hit[1] is None else int(hit[1]),
                        (low[0], high[0]) if low and high else None,
                    )
    return out


def batches_ours(meta: dict) -> Ours | None:
    """Ours for Hui's row (published.TD_MODEL) from td_evaluation's metadata (plain values): the mean
    share of the batches won against the random mover within 80 plies, n the games (batches x
    batch_games) and the 95% t interval over the batches; None when it holds no such figure."""
    if meta.get("win_ratio_mean") is None:
        return None
    per = meta.get("batch_games")
    n = len(meta.get("batch_ratios") or ()) * int(per) if per else None
    low, high = meta["win_ratio_interval"]
    return Ours(float(meta["win_ratio_mean"]), n, (float(low), float(high)))


def _cell(ours: Ours | None, f: Figure) -> tuple[str, str]:
    if ours is None:
        return "not measured", "-"
    value = fmt(ours.value, f.unit)
    if ours.interval is not None:
        value = interval_text(value, fmt(ours.interval[0], f.unit), fmt(ours.interval[1], f.unit), ours.n)
    return value, "-" if ours.n is None else f"{ours.n:,}"


def figures_table(inputs: ReportInputs) -> str:
    """The table: one row per published figure, ours on both protocols beside it."""
    lines = [
        "| source | measure | model | published | published n | published protocol "
        "| ours, published protocol | n | ours, leakage-free | n | trained on |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in inputs.figures:
        key = (f.table, f.where, f.metric)
        split = inputs.ours.get((on_published_split(f.model), *key)) if f.both_protocols else None
        own = inputs.ours.get((f.model, *key))
        a, an = _cell(split, f) if f.both_protocols else ("-", "-")
        b, bn = _cell(own, f)
        lines.append(
            f"| {f.source} | {f.measure} | {f.model} | {f.text()} | {f.n or '-'} | {f.protocol or '-'} "
            f"| {a} | {an} | {b} | {bn} | {inputs.sizes.get(f.model, 'not trained')} |"
        )
    return "\n".join(lines)


def steps_table(steps: list[Step]) -> str:
    lines = ["| step | status | wall time | detail |", "|---|---|---|---|"]
    total = 0.0
    for s in steps:
        total += s.seconds or 0.0
        lines.append(f"| {s.name} | {s.status} | {hms(s.seconds)} | {s.detail.replace('|', chr(92) + '|')} |")
    lines.append(f"| total | | {hms(total)} | sum of the steps' own times |")
    return "\n".join(lines)


def hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = round(seconds)
    return f"{s // 3600}h {s % 3600 // 60:02d}m {s % 60:02d}s" if s >= 3600 else f"{s // 60}m {s % 60:02d}s"


def render(inputs: ReportInputs) -> str:
    """reports/reproduction.md."""
    out = ["# The published tables, reproduced", "", "## What was run", ""]
    out += [f"- {k}: {v}" for k, v in inputs.settings.items()]
    out += [
        "",
        "## Published figures beside ours",
        "",
        "Ours on two protocols: the published one (`published_split_*`: positions split one by one, "
        "no leakage guard, so test positions and games also occur in train) and ours (split by game, "
        "no test position in train). n: the test rows, pairs, games or suite positions each value was "
        "measured on. Evaluation figures (suites, matches) are of the leakage-free models, but for "
        "DeepChess's pairs and STS solution ranking and Team 44's piece values, measured on both (each "
        f"protocol's model on its own test split). {PAIRS_ON_PUBLISHED_SPLIT}.",
        "",
        figures_table(inputs),
        "",
        "## Lubeck's experiment grid",
        "",
        inputs.lubeck_grid,
        "",
        "## How long each step took",
        "",
        "Wall time of each step as Dagster recorded it (run step stats). Status: what this run did with the "
        "step: `done`, `kept` (finished by an earlier run of the command and not redone; its time is that "
        "run's), `failed` or `skipped` (an input failed); `materialised` or `missing` for a step this run "
        "did not reach.",
        "",
        steps_table(inputs.steps),
        "",
        "## Where each model's training stopped",
        "",
        "Each model run: its train rows, the epochs done of those asked and why training stopped (every "
        "epoch asked for, early stopping, or the time budget: `--hours` gives each run a share; a cut is "
        "never silent), its pretraining where it has one, and the schedule the run gave it.",
        "",
        "| model run | trained on, and where it stopped |",
        "|---|---|",
        *(f"| {run} | {text.replace('|', chr(92) + '|')} |" for run, text in inputs.stops.items()),
        "",
        "## Pictures",
    ]
    for model, pics in inputs.pictures.items():
        out += ["", f"### {model}", ""] + [f"![{caption}]({path})" for caption, path in pics]
        if model in inputs.kaufman_tables:
            out += ["", "Kaufman test, per position (1-ply player; delta = |after suite's - after played|):", ""]
            out += [inputs.kaufman_tables[model]]
    return "\n".join(out) + "\n"
