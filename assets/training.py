"""Value networks trained from the dataset assets: one asset per published model."""

import time
from dataclasses import dataclass

import dagster as dg

from assets.config import DescribedConfig
from assets.metadata import png_md
from assets.resources import StoreResource
from pipeline.datasets import dataset_problem
from pipeline.evaluation import write_model_metrics
from pipeline.plots import confusion_png, learning_curves_png
from pipeline.store import atomic_path
from training.choices import Device, Profile
from training.train import TrainConfig, train

GROUP = "models"


@dataclass(frozen=True)
class ModelAsset:
    dataset: str
    model: str
    encoder: str
    anchor: str = ""
    """The published figure this model is compared with."""


MODELS = {
    "mlp_bitmap_3class": ModelAsset("sabatelli_3class", "mlp3", "bitmap768", "Sabatelli MLP bitmap: 96.07%"),
    "mlp_algebraic_3class": ModelAsset(
        "sabatelli_3class", "mlp3", "algebraic", "Sabatelli MLP algebraic (lower than bitmap)"
    ),
    "cnn_bitmap_3class": ModelAsset("sabatelli_3class", "cnn", "bitmap768", "Sabatelli CNN bitmap"),
    "cnn_algebraic_3class": ModelAsset("sabatelli_3class", "cnn", "algebraic", "Sabatelli CNN algebraic"),
    "cnn_features_3class": ModelAsset("sabatelli_3class", "cnn_features", "features", "Sabatelli CNN features: 97.44%"),
    "cnn_features_15class": ModelAsset(
        "sabatelli_15class", "cnn_features", "features", "Sabatelli CNN features 15 classes: 96.26%"
    ),
    "mlp_bitmap_15class": ModelAsset("sabatelli_15class", "mlp_wide", "bitmap768", "Sabatelli MLP 15 classes: 93.41%"),
    "mlp_bitmap_20class": ModelAsset("sabatelli_20class", "mlp_wide", "bitmap768", "Sabatelli MLP 20 classes: 68.33%"),
    "mlp_bitmap_regression": ModelAsset(
        "sabatelli_regression", "mlp_regression", "bitmap768", "Sabatelli regression MSE 0.0016"
    ),
    "lubeck_wdl_mlp": ModelAsset("lubeck_wdl", "lubeck", "bitmap768", "Lubeck WDL network"),
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


class TrainRunConfig(DescribedConfig):
    profile: Profile = "quick"
    """quick (a few CPU minutes) or full (the published schedules)."""
    epochs: int = 0
    """Most epochs; 0 takes the profile's."""
    max_train_rows: int = -1
    """Train rows to use (0: all); -1 takes the profile's."""
    batch_size: int = 0
    """Rows per training step; 0 takes the profile's."""
    lr: float = 0.0
    """Learning rate; 0 takes the model preset's (the published one)."""
    seed: int = 0
    """Seed of the initial weights, the shuffling and dropout: the same seed gives the same model."""
    device: Device = "auto"
    """auto: CUDA (bfloat16 autocast) when present, else every CPU core."""


def train_config(name: str, run: TrainRunConfig, store_root: str, out: str) -> TrainConfig:
    if run.profile not in PROFILES:
        raise ValueError(f"profile must be one of {list(PROFILES)}, got {run.profile!r}")
    m = MODELS[name]
    p = dict(PROFILES[run.profile])
    if run.epochs:
        p["epochs"] = run.epochs
    if run.max_train_rows >= 0:
        p["max_train_rows"] = run.max_train_rows
    if run.batch_size:
        p["batch_size"] = run.batch_size
    return TrainConfig(
        store=store_root,
        dataset=m.dataset,
        model=m.model,
        encoder=m.encoder,
        lr=run.lr,
        seed=run.seed,
        device=run.device,
        out=out,
        **p,
    )


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
        write_model_metrics(st, name, m.dataset, context.run.run_id, result.metric_rows())
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
        if result.history:
            meta["learning_curves"] = png_md(learning_curves_png(result.history, name), "learning curves")
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
        "| model | dataset | input | test positions | ours | majority class | published |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in MODELS.items():
        g = got.get(name)
        if g is None:
            lines.append(f"| {name} | {m.dataset} | {m.encoder} | - | not trained yet | - | {m.anchor} |")
            continue
        ours = (
            f"{g['accuracy']:.2%} accuracy"
            if "accuracy" in g
            else f"MSE {g.get('mse', float('nan')):.4f}, cp MAE {g.get('cp_mae', float('nan')):.0f}"
        )
        majority = f"{g['majority_class_accuracy']:.2%}" if "majority_class_accuracy" in g else "-"
        lines.append(
            f"| {name} | {m.dataset} | {m.encoder} | {int(g.get('rows', 0)):,} | {ours} | {majority} | {m.anchor} |"
        )
    table = "\n".join(lines) + (
        "\n\nOurs: leakage-free test splits (split by game, no test position in train) of the store's data; "
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
