"""The model catalog: every model asset's dataset, preset, encoder and published anchor, and the
training profiles (quick, full) with each model's own changes to them.

Plain data (no Dagster, no torch): the model assets (assets/training.py), `chess-pipeline
reproduce` and benchmarks/gpu_full.py's full-scale runs all read their schedules from here.
"""

from dataclasses import dataclass, field

from pipeline.research.published import DEEPCHESS as DEEPCHESS_PUBLISHED
from pipeline.research.published import TEAM44 as PIECE_VALUES_PUBLISHED
from pipeline.research.published import anchor, deepchess_anchor, piece_value_anchor
from training.choices import Profile


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
DEEPCHESS_SCORED_FULL = {"epochs": 60, "pretrain_epochs": 2, "patience": 6, "batch_size": 256}
"""deepchess_scored_net's (ours): two pretraining epochs a Pos2Vec layer (the reconstruction loss is
flat after them), then pairs until 6 epochs bring no better validation accuracy (15 epochs in 10
minutes on 2 CPU cores on every shared archive: docs/results/training.md)."""
MATERIAL_MLP_QUICK = {"epochs": 8, "patience": 3, "batch_size": 256, "threads": 1}
"""Issue 19's small MLPs step several times as fast as the 3-class MLP: more epochs in the quick
profile's 3 minutes, early stopping on validation loss keeping the best; one thread, since steps
this small gain nothing from a second and lose much when the cores are shared (measured on a
loaded 2-core machine: 3,838 positions/s on one thread, 370 on two)."""
CNN_REGULARISED_FULL = {"epochs": 30, "patience": 4}
"""Issue 39's regularised CNNs on the game rows (ours): the rate falls by 0.85 an epoch, so after
30 it is 1% of its start; 4 epochs without a better validation loss stop it (on every shared
archive, 2 CPU cores: 46 min on the bitmap, 64 min on the feature input; docs/results/regularised.md)."""
WIDE_REGULARISED_FULL = CNN_REGULARISED_FULL
"""Issue 39's regularised 15- and 20-class MLP (2048-2048-1050, ours): the CNNs' schedule (about 4
min an epoch on 2 CPU cores, so up to two hours; docs/results/regularised.md)."""
REGRESSION_REGULARISED_FULL = {"epochs": 10, "patience": 4}
"""Issue 39's regularised regression MLP (3x2048: 3.6 min an epoch of 584,234 rows on 2 CPU
cores): 10 epochs, 35 minutes, its validation loss still falling (docs/results/regularised.md)."""
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
    # Ours: the regression set on static labels grown by searched children (pipeline/datasets/search_positions.py).
    "mlp_search_regression": ModelAsset(
        "sabatelli_regression_search",
        "mlp_search",
        "bitmap768",
        "none (ours): must beat the traditional evaluation in the search (lubeck_grid)",
        profiles={"quick": MATERIAL_MLP_QUICK},
    ),
    # Ours (issue 39): Sabatelli's bitmap MLP, its published shape, with the regularised recipe
    # (training/models.py, mlp3_regularised) on the 3-class set grown by searched children.
    "mlp_bitmap_3class_search": ModelAsset(
        "sabatelli_3class_search",
        "mlp3_regularised",
        "bitmap768",
        "none (ours): Sabatelli's MLP (bitmap) shape, regularised, on the grown set; must beat the material rule",
    ),
    # Ours (issue 39): Sabatelli's CNN and regression MLP, their published shapes, with the recipe
    # against memorising games (training/models.py: cnn_regularised, mlp_regression_regularised).
    "cnn_bitmap_3class_regularised": ModelAsset(
        "sabatelli_3class",
        "cnn_regularised",
        "bitmap768",
        "none (ours): Sabatelli's CNN (bitmap) shape, regularised; must beat the material rule",
        profiles={"full": CNN_REGULARISED_FULL},
    ),
    # Ours (issue 39): Sabatelli's CNN on the feature input, its shape, with the same recipe.
    "cnn_features_3class_regularised": ModelAsset(
        "sabatelli_3class",
        "cnn_features_regularised",
        "features",
        "none (ours): Sabatelli's CNN (feature input) shape, regularised; must beat the material rule",
        profiles={"full": CNN_REGULARISED_FULL},
    ),
    # Ours (issue 39): Sabatelli's 15- and 20-class MLP, its shape, with the same recipe.
    "mlp_bitmap_15class_regularised": ModelAsset(
        "sabatelli_15class",
        "mlp_wide_regularised",
        "bitmap768",
        "none (ours): Sabatelli's 15-class MLP (bitmap) shape, regularised; must beat the material rule",
        profiles={"full": WIDE_REGULARISED_FULL},
    ),
    "mlp_bitmap_20class_regularised": ModelAsset(
        "sabatelli_20class",
        "mlp_wide_regularised",
        "bitmap768",
        "none (ours): Sabatelli's 20-class MLP (bitmap) shape, regularised; must beat the material rule",
        profiles={"full": WIDE_REGULARISED_FULL},
    ),
    "mlp_bitmap_regression_regularised": ModelAsset(
        "sabatelli_regression",
        "mlp_regression_regularised",
        "bitmap768",
        "none (ours): Sabatelli's regression MLP shape, regularised; must beat the fitted material line",
        profiles={"full": REGRESSION_REGULARISED_FULL},
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
    # Ours (issue 39): DeepChess's shape and schedule on deepchess's held-out pairs, its train pairs
    # every eligible position of the train games ordered by Stockfish's score (training/models.py).
    "deepchess_scored_net": ModelAsset(
        "deepchess_scored",
        "deepchess_scored",
        "bitmap773",
        "none (ours): DeepChess's comparator, train pairs by Stockfish's score; must beat material on the pairs",
        profiles={"quick": DEEPCHESS_QUICK, "full": DEEPCHESS_SCORED_FULL},
    ),
}
PIECE_VALUE_MODELS = [name for name, m in MODELS.items() if m.encoder == "pieces837"]
"""The model assets that are piece-value networks (one input per piece: their own evaluation)."""

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


def schedule(name: str, profile: Profile) -> dict:
    """The TrainConfig settings of model `name` under `profile`: PROFILES' and the model's own."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {list(PROFILES)}, got {profile!r}")
    return {**PROFILES[profile], **MODELS[name].profiles.get(profile, {})}
