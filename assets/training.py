"""Value networks trained from the dataset assets: one asset per published model."""

import time

import dagster as dg

from assets.config import DescribedConfig, config_from
from assets.metadata import png_md
from assets.resources import StoreResource
from assets.shared import MODEL_TAG, RUN_FOLDER_TAG
from assets.shared import MODELS_GROUP as GROUP
from pipeline.datasets.datasets import dataset_problem, protocol_text
from pipeline.play.evaluation import write_model_metrics
from pipeline.plots import confusion_png, learning_curves_png
from pipeline.research.published import DEEPCHESS
from pipeline.store.store_files import atomic_path
from training.catalog import MODELS, PROFILES, schedule  # noqa: F401 (PROFILES: re-exported)
from training.choices import Profile
from training.config import ScheduleOverrides, TrainConfig


class _ProfileRunConfig(DescribedConfig):
    """The training schedule: a profile (PROFILES), then the overrides of it (ScheduleOverrides)."""

    profile: Profile = "quick"
    """quick (a few CPU minutes) or full (the published schedules)."""


_ScheduleRunConfig = config_from(ScheduleOverrides, name="_ScheduleRunConfig", base=_ProfileRunConfig)

TrainRunConfig = config_from(
    TrainConfig,
    name="TrainRunConfig",
    base=_ScheduleRunConfig,
    names=["lr", "seed", "device"],
    doc="A model asset's run config: a profile and its overrides (training.config.ScheduleOverrides: left "
    "out, the profile's), then training.train.TrainConfig's lr, seed and device (the other TrainConfig "
    "fields come from the model and the profile).",
)


def train_config(name: str, run: TrainRunConfig, store_root: str, out: str) -> TrainConfig:
    """The TrainConfig of model `name` under a run config: its profile's schedule with the
    overrides given in place of the profile's (ValueError, one line, for a bad override)."""
    m = MODELS[name]
    p = run.to_dataclass(ScheduleOverrides).replace(schedule(name, run.profile))
    return run.to_dataclass(
        TrainConfig,
        store=store_root,
        dataset=m.dataset,
        model=m.model,
        encoder=m.encoder,
        target=m.target,
        out=out,
        **p,
    )


def deepchess_extras(name: str, cfg, result) -> tuple[dict, list[tuple[str, str, float]]]:
    """Metadata and model_metrics rows a DeepChess run adds: the material baseline on the same
    pairs, the model's train pair accuracy, the pretraining and fine-tuning curves, and each pair
    accuracy's (the model's and the baseline's, train, val and test) 95% interval clustered by
    game on both sides of the pairs (`<metric>_low95` / `_high95` rows, `pair_accuracy_intervals`)."""
    from pipeline.plots import pretrain_curves_png
    from pipeline.research.intervals import PAIR_GAMES, interval_text
    from training.deepchess import run_figures

    f = run_figures(cfg, result.checkpoint)
    by, guard = f["split"].get("by", "game"), f["split"].get("guard", True)
    protocol = protocol_text(f["split"])
    rows = [
        ("test", "split_by_position", float(by == "position")),  # which protocol these figures are on
        ("test", "leakage_guard", float(guard)),
        ("train", "pair_accuracy", f["model_train_accuracy"]),
        ("train", "rows", float(f["pairs_train_held"])),  # the pairs train's pair accuracy is measured on
        ("val", "rows", float(f["pairs_val"])),  # the pairs val's accuracy is measured on (the report's n)
        ("train", "material_baseline_accuracy", f["baseline_train_accuracy"]),
        ("val", "material_baseline_accuracy", f["baseline_val_accuracy"]),
    ]  # test's is in the run's test figures (training.deepchess.pair_baselines)
    # Each pair accuracy's 95% interval, clustered by game on both sides of the pairs (a game
    # gives many positions, so many pairs): <metric>_low95 / _high95 beside the figure.
    recorded = {
        ("train", "pair_accuracy"): f["model_train_accuracy"],
        ("val", "accuracy"): result.history[-1].get("val_accuracy") if result.history else None,
        ("test", "accuracy"): result.test.get("accuracy"),
        ("train", "material_baseline_accuracy"): f["baseline_train_accuracy"],
        ("val", "material_baseline_accuracy"): f["baseline_val_accuracy"],
        ("test", "material_baseline_accuracy"): result.test.get("material_baseline_accuracy"),
    }
    intervals: dict[str, dict] = {}
    for (split, metric), scores in f["pair_scores"].items():
        value = recorded.get((split, metric))
        if value is None or not len(scores.scores):
            continue
        low, high = scores.interval(cfg.seed)
        rows += [(split, f"{metric}_low95", low), (split, f"{metric}_high95", high)]
        cell = {"value": value, "low95": low, "high95": high, "n": len(scores.scores), "games": scores.games}
        intervals.setdefault(split, {})[metric] = cell

    def shown(split: str, metric: str) -> str:
        c = intervals.get(split, {}).get(metric)
        if c is None:  # no pairs, or no figure (a run with no epoch has no val accuracy)
            value = recorded.get((split, metric))
            return f"{float('nan') if value is None else value:.2%}"
        return interval_text(f"{c['value']:.2%}", f"{c['low95']:.2%}", f"{c['high95']:.2%}", None)

    last = {}
    for r in result.pretrain:
        last[r["layer"]] = r
    meta = {
        "split_protocol": protocol,
        "train_pair_accuracy": round(f["model_train_accuracy"], 4),
        "material_baseline_test_accuracy": round(f["baseline_test_accuracy"], 4),
        "pair_accuracy_intervals": intervals,
        "pair_accuracy_intervals_how": f"95% intervals: {PAIR_GAMES}; seed {cfg.seed}",
        "material_baseline": dg.MetadataValue.md(
            "Logistic regression P(right is the White-won one) = sigmoid(a + b x (material(left) - "
            f"material(right))), fitted on the run's first-epoch train pairs: a = {f['baseline_a']:.3f}, "
            f"b = {f['baseline_b']:.3f}\n\n| pairs | baseline | model |\n|---|---|---|\n"
            f"| train ({f['pairs_train']:,}; model: {f['pairs_train_held']:,}) "
            f"| {shown('train', 'material_baseline_accuracy')} | {shown('train', 'pair_accuracy')} |\n"
            f"| val ({f['pairs_val']:,}) | {shown('val', 'material_baseline_accuracy')} "
            f"| {shown('val', 'accuracy')} |\n"
            f"| test ({f['pairs_test']:,}) | {shown('test', 'material_baseline_accuracy')} "
            f"| {shown('test', 'accuracy')} |\n\n"
            f"95% intervals: {PAIR_GAMES} (seed {cfg.seed}). "
            f"Published (DeepChess): train {DEEPCHESS['train_pair_accuracy']:.2%}, "
            f"val {DEEPCHESS['val_pair_accuracy']:.2%}."
        ),
        "pretraining": dg.MetadataValue.md(
            "| layer | epochs | last reconstruction BCE (train) | val |\n|---|---|---|---|\n"
            + "\n".join(
                f"| {k} | {r['epoch'] + 1} | {r['train_loss']:.4f} | "
                + ("- |" if r["val_loss"] is None else f"{r['val_loss']:.4f} |")
                for k, r in sorted(last.items())
            )
            if last
            else "no pretraining in this run"
        ),
        "learning_curves": png_md(
            pretrain_curves_png(result.pretrain, result.history, f["baseline_val_accuracy"], f"{name}: curves"),
            "pretraining and fine-tuning curves",
        ),
    }
    return meta, rows


def model_extras(name: str, cfg: TrainConfig, result) -> tuple[dict, list[tuple[str, str, float]]]:
    """A model's own figures beside the common ones: (metadata, model_metrics rows)."""
    from training.models import PRESETS  # torch: not at import

    if PRESETS[MODELS[name].model].kind == "siamese":
        return deepchess_extras(name, cfg, result)  # baseline, train accuracy, pretraining curves
    return {}, []


def train_and_record(
    context: dg.AssetExecutionContext,
    config: TrainRunConfig,
    st,
    name: str,
    key: str,
    train_store,
    dataset: str,
    published: str,
) -> dg.MaterializeResult:
    """Train catalog model `name` on `train_store`'s datasets as asset `key` (the model asset,
    or its published-split copy), its figures into `st`'s model_metrics under (key, dataset),
    and the asset's metadata: the schedule, the test figures beside the baselines, the charts."""
    m = MODELS[name]
    out = st.root / "models" / key / context.run.tags.get(RUN_FOLDER_TAG, context.run.run_id)
    cfg = train_config(name, config, str(train_store.root), str(out))
    start = time.monotonic()
    from training.train import train  # the run's imports: not when the definitions load

    result = train(cfg, log=context.log.info)
    extra_meta, extra_rows = model_extras(name, cfg, result)
    write_model_metrics(st, key, dataset, context.run.run_id, result.metric_rows() + extra_rows)
    test = result.test
    meta = {
        "checkpoint": dg.MetadataValue.path(str(result.checkpoint)),
        "dataset": dataset,
        "model": m.model,
        "encoder": m.encoder,
        "profile": config.profile,
        "device": result.device,
        "epochs": len(result.history),
        "seconds": round(time.monotonic() - start, 1),
        "train_positions_per_second": round(result.positions_per_second),
        "rows_train": result.rows["train"],
        "rows_val": result.rows["val"],
        "rows_test": result.rows["test"],
        "published": published,
    }
    if "accuracy" in test:
        meta["test_accuracy"] = round(test["accuracy"], 4)
        meta["majority_class_accuracy"] = round(test["majority_class_accuracy"], 4)
        if "material_baseline_accuracy" in test:  # the material rule on the same test rows
            meta["material_baseline_accuracy"] = round(test["material_baseline_accuracy"], 4)
        if "material_lead" in test:  # and the lead over it, with its interval
            meta["material_lead"] = round(test["material_lead"], 4)
            meta["material_lead_ci95"] = round(test["material_lead_ci95"], 4)
        meta["per_class_accuracy"] = dg.MetadataValue.md(
            "| class | accuracy |\n|---|---|\n"
            + "\n".join(
                f"| {i} | {'-' if a is None else f'{a:.3f}'} |" for i, a in enumerate(test["per_class_accuracy"])
            )
        )
        meta["confusion_matrix"] = png_md(confusion_png(test["confusion"], f"{key}: test"), "confusion matrix")
    else:
        meta["test_mse"] = round(test.get("mse", float("nan")), 6)
        meta["test_cp_mae"] = round(test.get("cp_mae", float("nan")), 1)
        if "material_baseline_mse" in test:  # train's mean and the material line on the same test rows
            meta["mean_baseline_mse"] = round(test["mean_baseline_mse"], 6)
            meta["material_baseline_mse"] = round(test["material_baseline_mse"], 6)
        if "material_line_lead" in test:  # the line's MSE less ours, with its interval (clustered by game)
            meta["material_line_lead"] = round(test["material_line_lead"], 6)
            meta["material_line_lead_ci95"] = round(test["material_line_lead_ci95"], 6)
    if "majority_class_accuracy" in test or "mean_baseline_mse" in test:
        from training.baselines import baselines_table

        meta["baselines"] = dg.MetadataValue.md(baselines_table(test))
    if result.history:
        meta["learning_curves"] = png_md(learning_curves_png(result.history, key), "learning curves")
    meta.update(result.stop_metadata())  # the epochs asked, the time bound, where and why it stopped
    meta.update(extra_meta)
    return dg.MaterializeResult(metadata=meta)


def model_asset(name: str) -> dg.AssetsDefinition:
    m = MODELS[name]

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[m.dataset],
        tags={MODEL_TAG: name},
        description=f"{m.model} on {m.encoder} input, trained on {m.dataset} ({m.anchor}).",
    )
    def _model(context: dg.AssetExecutionContext, config: TrainRunConfig, store: StoreResource):
        st = store.get()
        problem = dataset_problem(st, m.dataset)
        if problem:  # before torch starts: one line saying what is missing
            raise ValueError(problem)
        return train_and_record(context, config, st, name, name, st, m.dataset, m.anchor)

    return _model


model_assets = [model_asset(name) for name in MODELS]


def by_lead(got: dict[str, dict]) -> list[str]:
    """The model assets in the order of their test lead over material (accuracy points, the
    largest first), then those without one (a regression target, not trained yet) in MODELS' order."""
    led = sorted((n for n in MODELS if "material_lead" in got.get(n, {})), key=lambda n: -got[n]["material_lead"])
    return led + [n for n in MODELS if n not in led]


def _lead_cell(g: dict) -> str:
    """A model's lead over material in the results table: accuracy points over the rule, or the
    material line's MSE less the model's, each with half its 95% interval (clustered by game)."""
    if "material_lead_ci95" in g:
        return f"{g['material_lead']:+.2%} +/- {g['material_lead_ci95']:.2%}"
    if "material_line_lead_ci95" in g:
        return f"MSE {g['material_line_lead']:+.5f} +/- {g['material_line_lead_ci95']:.5f} (the line's less ours)"
    if "mse" in g and "material_baseline_mse" in g:  # a run from before the interval
        return f"MSE {g['material_baseline_mse'] - g['mse']:+.5f} (the line's less ours)"
    return "-"


@dg.asset(
    group_name=GROUP,
    deps=list(MODELS),
    description="Every model's newest test figures next to the published ones (Markdown table; "
    "also reports/model_results.md in the store).",
)
def model_results(store: StoreResource) -> dg.MaterializeResult:
    from pipeline.store.duck import memory_connection

    st = store.get()
    with memory_connection(st) as con:
        rows = con.sql(
            "SELECT model, dataset, metric, value FROM model_metrics WHERE split = 'test' "
            "QUALIFY materialised_at = max(materialised_at) OVER (PARTITION BY model)"
        ).fetchall()
    got: dict[str, dict] = {}
    for model, dataset, metric, value in rows:
        got.setdefault(model, {"dataset": dataset})[metric] = value
    lines = [
        "| model | dataset | input | test positions | ours | majority class | material | lead over material "
        "(95%, by game) | published |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in by_lead(got):
        m, g = MODELS[name], got.get(name)
        if g is None:
            lines.append(f"| {name} | {m.dataset} | {m.encoder} | - | not trained yet | - | - | - | {m.anchor} |")
            continue
        ours = (
            f"{g['accuracy']:.2%} accuracy"
            if "accuracy" in g
            else f"MSE {g.get('mse', float('nan')):.4f}"
            + (f", cp MAE {g['cp_mae']:.0f}" if "cp_mae" in g else "")  # a result target has none
        )
        majority = (
            f"{g['majority_class_accuracy']:.2%}"
            if "majority_class_accuracy" in g
            else (f"MSE {g['mean_baseline_mse']:.4f} (train mean)" if "mean_baseline_mse" in g else "-")
        )
        material = (
            f"{g['material_baseline_accuracy']:.2%}"
            if "material_baseline_accuracy" in g
            else (f"MSE {g['material_baseline_mse']:.4f} (line)" if "material_baseline_mse" in g else "-")
        )
        lead = _lead_cell(g)
        lines.append(
            f"| {name} | {m.dataset} | {m.encoder} | {int(g.get('rows', 0)):,} | {ours} | {majority} | {material} "
            f"| {lead} | {m.anchor} |"
        )
    table = "\n".join(lines) + (
        "\n\nMajority class (of train) and material (the rule, or a line fitted on train; training/baselines.py) "
        "are scored on the model's own test rows; the lead is the model's accuracy less material's on those "
        "rows (pairs for a comparator), its interval clustered by game; rows sorted by it, the largest first. "
        "Ours: leakage-free test splits (split by game, no test position in train) of the store's data; "
        "the published figures come from splits without that guard and from about 3 million positions.\n"
    )
    path = st.root / "reports" / "model_results.md"
    with atomic_path(path) as tmp:
        tmp.write_text(table)
    return dg.MaterializeResult(
        metadata={
            "table": dg.MetadataValue.md(table),
            "models_trained": len(got),
            "path": dg.MetadataValue.path(str(path)),
        }
    )
