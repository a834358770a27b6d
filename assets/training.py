"""Value networks trained from the dataset assets: one asset per published model."""

import time
from dataclasses import dataclass, field

import dagster as dg

from assets.config import DescribedConfig, config_from
from assets.metadata import png_md
from assets.resources import StoreResource
from pipeline.datasets import dataset_problem
from pipeline.evaluation import write_model_metrics
from pipeline.plots import confusion_png, learning_curves_png
from pipeline.published import anchor, deepchess_anchor, piece_value_anchor
from pipeline.store import atomic_path
from training.baselines import baselines_table
from training.choices import Profile
from training.deepchess import PUBLISHED as DEEPCHESS_PUBLISHED
from training.piece_values import PUBLISHED as PIECE_VALUES_PUBLISHED
from training.train import TrainConfig, train

GROUP = "models"


@dataclass(frozen=True)
class ModelAsset:
    dataset: str
    model: str
    encoder: str
    anchor: str = ""
    """The published figure this model is compared with."""
    target: str = "target"
    """The dataset column it learns (training.train.TrainConfig.target)."""
    profiles: dict = field(default_factory=dict)
    """profile -> settings replacing PROFILES' for this model (a slower model's shorter evaluation)."""


PIECE_VALUE_QUICK = {"batch_size": 64, "max_eval_rows": 4000, "pretrain_epochs": 1}
"""The piece-value networks run an 837-600-400-200-100 encoder on every piece (about 26 a
position): quick evaluates on fewer rows, so that it stays within a few CPU minutes, pretrains
the autoencoder one epoch (at most half of the 3 minutes) and takes small batches (more steps
in the minutes left)."""
PIECE_VALUE_FULL = {"pretrain_epochs": 5}
"""Team 44's schedule is not published: the full profile's 50 epochs with early stopping, after 5
autoencoder epochs per layer (ours; not 50 per layer as pretrain_epochs -1 would give)."""
DEEPCHESS_QUICK = {"batch_size": 256, "pretrain_epochs": 1, "max_eval_rows": 20_000, "max_minutes": 6.0}
"""DeepChess pretrains four layers before its pairs: one epoch each and 6 minutes in all (half of
it for the pretraining), on 2 CPU cores."""
DEEPCHESS_FULL = {"epochs": 1000, "pretrain_epochs": 200, "patience": 20}
"""The published schedule as we read it: 200 epochs per Pos2Vec layer, up to 1,000 epochs on
pairs (early stopping, patience 20: the pairs change every epoch)."""
MATERIAL_MLP_QUICK = {"epochs": 8, "patience": 3, "batch_size": 256, "threads": 1}
"""Issue 19's small MLPs step several times as fast as the 3-class MLP: more epochs in the quick
profile's 3 minutes, early stopping on validation loss keeping the best; one thread, since steps
this small gain nothing from a second and lose much when the cores are shared (measured on a
loaded 2-core machine: 3,838 positions/s on one thread, 370 on two)."""
MODELS = {
    "mlp_bitmap_3class": ModelAsset("sabatelli_3class", "mlp3", "bitmap768", anchor("mlp_bitmap_3class")),
    "mlp_algebraic_3class": ModelAsset(
        "sabatelli_3class", "mlp3", "algebraic", "Sabatelli MLP algebraic (lower than bitmap)"
    ),
    # Ours (issue 19), beside the published ones: networks that beat the material rule on a few
    # thousand games (README, Training); the demo trains mlp_counts_3class.
    "mlp_material_3class": ModelAsset(
        "sabatelli_3class",
        "mlp_material",
        "bitmap768_counts",
        "none (ours): must beat the material rule",
        profiles={"quick": MATERIAL_MLP_QUICK},
    ),
    "mlp_counts_3class": ModelAsset(
        "sabatelli_3class",
        "mlp_counts",
        "piece_counts",
        "none (ours): a learnt material evaluation, must beat the material rule",
        profiles={"quick": MATERIAL_MLP_QUICK},
    ),
    "cnn_bitmap_3class": ModelAsset("sabatelli_3class", "cnn", "bitmap768", "Sabatelli CNN bitmap"),
    "cnn_algebraic_3class": ModelAsset("sabatelli_3class", "cnn", "algebraic", "Sabatelli CNN algebraic"),
    "cnn_features_3class": ModelAsset("sabatelli_3class", "cnn_features", "features", anchor("cnn_features_3class")),
    "cnn_features_15class": ModelAsset("sabatelli_15class", "cnn_features", "features", anchor("cnn_features_15class")),
    "mlp_bitmap_15class": ModelAsset("sabatelli_15class", "mlp_wide", "bitmap768", anchor("mlp_bitmap_15class")),
    "mlp_bitmap_20class": ModelAsset("sabatelli_20class", "mlp_wide", "bitmap768", anchor("mlp_bitmap_20class")),
    "mlp_bitmap_regression": ModelAsset(
        "sabatelli_regression", "mlp_regression", "bitmap768", anchor("mlp_bitmap_regression")
    ),
    "lubeck_wdl_mlp": ModelAsset("lubeck_wdl", "lubeck", "bitmap768", "Lubeck WDL network"),
    "piece_value_net": ModelAsset(
        "piece_values",
        "piece_value_cp",
        "pieces837",
        piece_value_anchor(PIECE_VALUES_PUBLISHED),
        profiles={"quick": PIECE_VALUE_QUICK, "full": PIECE_VALUE_FULL},
    ),
    "piece_value_net_result": ModelAsset(
        "piece_values",
        "piece_value_result",
        "pieces837",
        "Team 44's second variant: the sum through a sigmoid, regressed to the game result",
        target="result_score",
        profiles={"quick": PIECE_VALUE_QUICK, "full": PIECE_VALUE_FULL},
    ),
    # Named apart from its dataset (the asset `deepchess`): asset keys are one namespace.
    "deepchess_net": ModelAsset(
        "deepchess",
        "deepchess",
        "bitmap773",
        deepchess_anchor(DEEPCHESS_PUBLISHED),
        profiles={"quick": DEEPCHESS_QUICK, "full": DEEPCHESS_FULL},
    ),
}

PROFILES: dict[Profile, dict] = {
    # A few CPU minutes: part of train, a few epochs, at most 3 minutes of training.
    "quick": {
        "epochs": 4,
        "patience": 2,
        "batch_size": 512,
        "max_train_rows": 200_000,
        "max_eval_rows": 50_000,
        "max_minutes": 3.0,
    },
    # The published schedules: every row, early stopping decides.
    "full": {
        "epochs": 50,
        "patience": 5,
        "batch_size": 256,
        "max_train_rows": 0,
        "max_eval_rows": 0,
        "max_minutes": 0.0,
    },
}


class _ProfileRunConfig(DescribedConfig):
    """The training schedule: a profile (PROFILES) and the settings that override it."""

    profile: Profile = "quick"
    """quick (a few CPU minutes) or full (the published schedules)."""
    epochs: int = 0
    """Most epochs; 0 takes the profile's."""
    max_train_rows: int = -1
    """Train rows to use (0: all); -1 takes the profile's."""
    batch_size: int = 0
    """Rows per training step; 0 takes the profile's."""


TrainRunConfig = config_from(
    TrainConfig,
    name="TrainRunConfig",
    base=_ProfileRunConfig,
    names=["lr", "seed", "device"],
    doc="A model asset's run config: a profile and its overrides, then training.train.TrainConfig's "
    "lr, seed and device (the other TrainConfig fields come from the model and the profile).",
)


def train_config(name: str, run: TrainRunConfig, store_root: str, out: str) -> TrainConfig:
    if run.profile not in PROFILES:
        raise ValueError(f"profile must be one of {list(PROFILES)}, got {run.profile!r}")
    m = MODELS[name]
    p = {**PROFILES[run.profile], **m.profiles.get(run.profile, {})}
    if run.epochs:
        p["epochs"] = run.epochs
    if run.max_train_rows >= 0:
        p["max_train_rows"] = run.max_train_rows
    if run.batch_size:
        p["batch_size"] = run.batch_size
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


def model_extras(name: str, cfg: TrainConfig, result) -> tuple[dict, list[tuple[str, str, float]]]:
    """A model's own figures beside the common ones: (metadata, model_metrics rows)."""
    if MODELS[name].model == "deepchess":
        from assets.deepchess import training_extras  # baseline, train accuracy, pretraining curves

        return training_extras(name, cfg, result)
    return {}, []


def model_asset(name: str) -> dg.AssetsDefinition:
    m = MODELS[name]

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[m.dataset],
        description=f"{m.model} on {m.encoder} input, trained on {m.dataset} ({m.anchor}).",
    )
    def _model(context: dg.AssetExecutionContext, config: TrainRunConfig, store: StoreResource):
        st = store.get()
        problem = dataset_problem(st, m.dataset)
        if problem:  # before torch starts: one line saying what is missing
            raise ValueError(problem)
        out = st.root / "models" / name / context.run.run_id
        cfg = train_config(name, config, str(st.root), str(out))
        start = time.monotonic()
        result = train(cfg, log=context.log.info)
        extra_meta, extra_rows = model_extras(name, cfg, result)
        write_model_metrics(st, name, m.dataset, context.run.run_id, result.metric_rows() + extra_rows)
        test = result.test
        meta = {
            "checkpoint": dg.MetadataValue.path(str(result.checkpoint)),
            "dataset": m.dataset,
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
            "published": m.anchor,
        }
        if "accuracy" in test:
            meta["test_accuracy"] = round(test["accuracy"], 4)
            meta["majority_class_accuracy"] = round(test["majority_class_accuracy"], 4)
            if "material_baseline_accuracy" in test:  # the material rule on the same test rows
                meta["material_baseline_accuracy"] = round(test["material_baseline_accuracy"], 4)
            meta["per_class_accuracy"] = dg.MetadataValue.md(
                "| class | accuracy |\n|---|---|\n"
                + "\n".join(
                    f"| {i} | {'-' if a is None else f'{a:.3f}'} |" for i, a in enumerate(test["per_class_accuracy"])
                )
            )
            meta["confusion_matrix"] = png_md(confusion_png(test["confusion"], f"{name}: test"), "confusion matrix")
        else:
            meta["test_mse"] = round(test.get("mse", float("nan")), 6)
            meta["test_cp_mae"] = round(test.get("cp_mae", float("nan")), 1)
            if "material_baseline_mse" in test:  # train's mean and the material line on the same test rows
                meta["mean_baseline_mse"] = round(test["mean_baseline_mse"], 6)
                meta["material_baseline_mse"] = round(test["material_baseline_mse"], 6)
        if "majority_class_accuracy" in test or "mean_baseline_mse" in test:
            meta["baselines"] = dg.MetadataValue.md(baselines_table(test))
        if result.history:
            meta["learning_curves"] = png_md(learning_curves_png(result.history, name), "learning curves")
        meta.update(extra_meta)
        return dg.MaterializeResult(metadata=meta)

    return _model


model_assets = [model_asset(name) for name in MODELS]


@dg.asset(
    group_name=GROUP,
    deps=list(MODELS),
    description="Every model's newest test figures next to the published ones (Markdown table; "
    "also reports/model_results.md in the store).",
)
def model_results(store: StoreResource) -> dg.MaterializeResult:
    from pipeline.duck import memory_connection

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
        "| model | dataset | input | test positions | ours | majority class | material | published |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in MODELS.items():
        g = got.get(name)
        if g is None:
            lines.append(f"| {name} | {m.dataset} | {m.encoder} | - | not trained yet | - | - | {m.anchor} |")
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
        lines.append(
            f"| {name} | {m.dataset} | {m.encoder} | {int(g.get('rows', 0)):,} | {ours} | {majority} | {material} "
            f"| {m.anchor} |"
        )
    table = "\n".join(lines) + (
        "\n\nMajority class (of train) and material (the rule, or a line fitted on train; training/baselines.py) "
        "are scored on the model's own test rows. "
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
