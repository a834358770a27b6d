"""The published figures the reproduction compares with, each with where ours comes from.

One place for the numbers of Sabatelli's thesis (2017), Kaufman's test as he used it and Hui's
self-play (2018), DeepChess's (DEEPCHESS, and Experiment 1's buckets DEEPCHESS_BUCKETS) and Team
44's (TEAM44), which `deepchess_figures` and `piece_value_figures` turn into rows of the same kind.
Import them from here (plain data, no torch). Each figure says whether ours is measured on
both split protocols (`both_protocols`), and SPLIT_MODELS names the models trained again on the
published split for that. No Dagster, no torch.
"""

from dataclasses import dataclass
from typing import Literal

Table = Literal["model_metrics", "evaluation_results"]
Unit = Literal["share", "mse", "pawns", "count", "percent"]

DEEPCHESS = {
    "train_pair_accuracy": 0.9668,
    "val_pair_accuracy": 0.9674,
    "sts_points": (1160, 15000),
    "sts_solution_ranking": (0.6188, 1381),
}
"""DeepChess's published figures (sources: training/deepchess.py): train / validation pair
accuracy, STS points (of the total) and solution ranking (share, positions)."""
DEEPCHESS_BUCKETS = {
    "A_even_even": (0.6937, 108_780),
    "B_white_adv_black_adv": (0.9585, 43_368),
    "C_white_adv_even": (0.9501, 112_034),
    "D_even_black_adv": (0.9089, 112_406),
}
"""DeepChess Experiment 1 (Low 2021): accuracy and pairs per bucket (training.deepchess.BUCKETS)."""
TEAM44 = {"knight": 2.94, "bishop": 3.13, "rook": 4.96, "queen": 9.87}
"""Team 44's average learned values, pawn = 1."""

SABATELLI = "Sabatelli 2017"
SABATELLI_N = "about 3 million positions (all splits)"
"""The thesis trains on about 3 million positions; it gives no test-split size per network."""
SABATELLI_PROTOCOL = "positions split one by one, no leakage guard; Stockfish labels"


@dataclass(frozen=True)
class Figure:
    """One published figure and the row of ours it is compared with."""

    source: str
    """Who published it (author and year)."""
    measure: str
    """What it measures, in words."""
    value: float | None
    """The figure (a share for accuracies); None where the source states no number."""
    unit: Unit
    n: str
    """The published figure's sample, as the source states it ('' where it states none)."""
    protocol: str
    """How the published figure was measured."""
    model: str
    """Our model asset it is compared with (rows of model_metrics / evaluation_results)."""
    table: Table
    """Where ours is: model_metrics (split, metric) or evaluation_results (suite, metric)."""
    where: str
    """model_metrics: the split; evaluation_results: the suite."""
    metric: str
    stated: str = ""
    """The published statement, where it is words rather than a number."""
    both_protocols: bool = False
    """Ours is measured on both split protocols: by the model asset (ours, split by game) and by
    its published-split copy (`published_split_<model>`, and that copy's evaluation asset for an
    evaluation_results figure). False: the leakage-free model only (suites, matches)."""

    def text(self) -> str:
        """The published figure as the report prints it."""
        return self.stated if self.value is None else fmt(self.value, self.unit)


def fmt(value: float, unit: Unit) -> str:
    if unit == "share":
        return f"{value:.2%}"
    if unit == "percent":
        return f"{value:.2f}%"
    if unit == "mse":
        return f"{value:.4f}"
    if unit == "pawns":
        return f"{value:.2f} pawns"
    return f"{value:g}"


def _sabatelli(model: str, measure: str, value: float | None, stated: str = "", metric: str = "accuracy") -> Figure:
    return Figure(
        SABATELLI,
        measure,
        value,
        "mse" if metric == "mse" else "share",
        SABATELLI_N,
        SABATELLI_PROTOCOL,
        model,
        "model_metrics",
        "test",
        metric,
        stated,
        both_protocols=True,
    )


MODEL_FIGURES: dict[str, Figure] = {
    "mlp_bitmap_3class": _sabatelli("mlp_bitmap_3class", "MLP, bitmap input, 3 classes: test accuracy", 0.9607),
    "mlp_algebraic_3class": _sabatelli(
        "mlp_algebraic_3class", "MLP, algebraic input, 3 classes: test accuracy", None, "lower than bitmap"
    ),
    "cnn_bitmap_3class": _sabatelli(
        "cnn_bitmap_3class", "CNN, bitmap input, 3 classes: test accuracy", None, "below the feature CNN"
    ),
    "cnn_algebraic_3class": _sabatelli(
        "cnn_algebraic_3class", "CNN, algebraic input, 3 classes: test accuracy", None, "below the feature CNN"
    ),
    "cnn_features_3class": _sabatelli("cnn_features_3class", "CNN, feature input, 3 classes: test accuracy", 0.9744),
    "cnn_features_15class": _sabatelli("cnn_features_15class", "CNN, feature input, 15 classes: test accuracy", 0.9626),
    "mlp_bitmap_15class": _sabatelli("mlp_bitmap_15class", "MLP, bitmap input, 15 classes: test accuracy", 0.9341),
    "mlp_bitmap_20class": _sabatelli("mlp_bitmap_20class", "MLP, bitmap input, 20 classes: test accuracy", 0.6833),
    "mlp_bitmap_regression": _sabatelli(
        "mlp_bitmap_regression", "MLP regression: test MSE (target in [0, 1])", 0.0016, metric="mse"
    ),
    "lubeck_wdl_mlp": Figure(
        "Lubeck",
        "W/D/L network: test accuracy",
        None,
        "share",
        "",
        "his report gives no accuracy",
        "lubeck_wdl_mlp",
        "model_metrics",
        "test",
        "accuracy",
        "none published",
        both_protocols=True,
    ),
}
"""Each model's headline figure (its test metric), by model asset."""

KAUFMAN_MLP_PAWNS = 1.56
KAUFMAN_CNN_PAWNS = 1.55
KAUFMAN_BEST_MOVES = (2, 25)
KAUFMAN_PROTOCOL = "1-ply player; distance between Stockfish's score after the suite's move and after the network's"
HUI_RANDOM_PEAK = 0.84
HUI_RANDOM_RANGE = (0.73, 0.798)
"""Hui's share of 100-game batches won against the random mover within 80 plies: from, to."""
HUI_RANDOM_RANGE_TEXT = f"{HUI_RANDOM_RANGE[0] * 100:.3g}-{HUI_RANDOM_RANGE[1] * 100:.3g}%"
HUI_RANDOM_PEAK_TEXT = f"{HUI_RANDOM_PEAK * 100:.3g}%"
HUI_RANDOM = f"{HUI_RANDOM_RANGE_TEXT}, peak {HUI_RANDOM_PEAK_TEXT}"
"""Hui's figures in words ('73-79.8%, peak 84%')."""

TD_MODEL = "td_selfplay"
"""The asset Hui's figure is compared with: the TD learner's line (training/td), whose last
checkpoint td_evaluation checks with Hui's protocol (HUI_PROTOCOL)."""
HUI_PROTOCOL = (
    "TD-Leaf(lambda), linear evaluation over the antisymmetric bitboard, lambda 0.7, learning rate 0.01, "
    "searched at depth 2; games from the start against the random mover, colours alternating, a game won "
    "only within 80 plies, batches of 100 games"
)
"""Hui's settings and test, which the reproduction's TD line and td_evaluation keep (training.td.config)."""

OptionalStage = Literal["ours"]
"""A stage of `chess-pipeline reproduce` beyond the published figures (`--with ours`): the project's
own measures, which no published figure is compared with: the matches and their Elo
(eval_matches_<model>, eval_head_to_head, elo_ratings, eval_report_<model>), the suites' deeper
searches (depth 2; the published figures are 1-ply), the TD line's match against the traditional
evaluation, and the models with no published figure."""

EVALUATION_FIGURES: tuple[Figure, ...] = (
    Figure(
        SABATELLI,
        "Kaufman test, average delta (MLP)",
        KAUFMAN_MLP_PAWNS,
        "pawns",
        f"{KAUFMAN_BEST_MOVES[1]} positions",
        KAUFMAN_PROTOCOL,
        "mlp_bitmap_3class",
        "evaluation_results",
        "kaufman",
        "avg_delta_pawns_1ply",
    ),
    Figure(
        SABATELLI,
        "Kaufman test, average delta (CNN)",
        KAUFMAN_CNN_PAWNS,
        "pawns",
        f"{KAUFMAN_BEST_MOVES[1]} positions",
        KAUFMAN_PROTOCOL,
        "cnn_features_3class",
        "evaluation_results",
        "kaufman",
        "avg_delta_pawns_1ply",
    ),
    Figure(
        SABATELLI,
        "Kaufman test, best moves found (MLP)",
        KAUFMAN_BEST_MOVES[0],
        "count",
        f"{KAUFMAN_BEST_MOVES[1]} positions",
        KAUFMAN_PROTOCOL,
        "mlp_bitmap_3class",
        "evaluation_results",
        "kaufman",
        "best_moves_found_1ply",
    ),
    Figure(
        "Hui 2018",
        "TD-Leaf self-play: share of 100-game batches won against the random mover within 80 plies "
        "(ours: the mean of the batches; published: from-to and the peak)",
        None,
        "share",
        "100 games a batch",
        HUI_PROTOCOL,
        TD_MODEL,
        "evaluation_results",
        "random",
        "win_ratio_batches",
        stated=HUI_RANDOM,
    ),
)
"""Figures of the evaluation (suites and matches), each beside the model it is compared with."""

KAUFMAN_ANCHOR = (
    f"Sabatelli: average delta {KAUFMAN_MLP_PAWNS} pawns (MLP), {KAUFMAN_CNN_PAWNS} (CNN); "
    f"{KAUFMAN_BEST_MOVES[0]} of {KAUFMAN_BEST_MOVES[1]} best moves"
)
"""Kaufman's figures in one line, as the evaluation rows' detail names them."""


def anchor(model: str) -> str:
    """A model's published figure in one line ('Sabatelli 2017, MLP, ...: test accuracy 96.07%'),
    for the model assets' descriptions, metadata and the model_results table."""
    f = MODEL_FIGURES.get(model)
    return f"{f.source}, {f.measure} {f.text()}" if f else ""


def piece_value_anchor(published: dict) -> str:
    """Team 44's average piece values (TEAM44) in one line."""
    return "Team 44: " + ", ".join(f"{piece} {value:.2f}" for piece, value in published.items()) + " (pawn = 1)"


def deepchess_anchor(published: dict) -> str:
    """DeepChess's pair accuracies (DEEPCHESS) in one line."""
    train, val = (fmt(published[k], "share") for k in ("train_pair_accuracy", "val_pair_accuracy"))
    return f"DeepChess: train / val pair accuracy {train} / {val}"


DEEPCHESS_MODEL = "deepchess_net"
"""The model asset DeepChess's figures are compared with."""
TEAM44_MODEL = "piece_value_net"
"""The model asset Team 44's piece values are compared with (the centipawn variant; their second,
the result variant, has no published figure)."""
SPLIT_MODELS: tuple[str, ...] = (*MODEL_FIGURES, DEEPCHESS_MODEL, TEAM44_MODEL)
"""The models whose published figures were measured on a split of their own data: trained (and,
where the figure is an evaluation's, evaluated) again on the published split for the comparison."""
PAIRS_ON_PUBLISHED_SPLIT = (
    "DeepChess's pairs are drawn within each split file on both protocols; on the published split the "
    "positions are split one by one, so a game can have positions on both sides (in train pairs and in "
    "test pairs): that is the published protocol"
)
"""What "published split" means for DeepChess's pairs (the report and the pair evaluation say it)."""


def deepchess_figures(published: dict, buckets: dict) -> list[Figure]:
    """DeepChess's figures (DEEPCHESS and DEEPCHESS_BUCKETS) as rows: the pair
    accuracies, buckets and solution ranking on both protocols, the STS points on ours."""
    src, model = "DeepChess (David et al. 2016; Low 2021 for the buckets)", DEEPCHESS_MODEL
    rows = [
        Figure(src, "pair accuracy, train", published["train_pair_accuracy"], "share", "", "", model,
               "model_metrics", "train", "pair_accuracy", both_protocols=True),
        Figure(src, "pair accuracy, validation", published["val_pair_accuracy"], "share", "", "", model,
               "model_metrics", "val", "accuracy", both_protocols=True),
    ]  # fmt: skip
    for name, (acc, n) in buckets.items():
        rows.append(
            Figure(src, f"Experiment 1, bucket {name}", acc, "share", f"{n:,} pairs", "", model,
                   "evaluation_results", "deepchess_pairs", name, both_protocols=True)
        )  # fmt: skip
    points, top = published["sts_points"]
    rows.append(
        Figure(src, "STS points, 1-ply round robin", points, "count", f"of {top:,}", "", model,
               "evaluation_results", "STS1-STS15_LAN_v3", "points_1ply")
    )  # fmt: skip
    share, n = published["sts_solution_ranking"]
    rows.append(
        Figure(src, "STS solution ranking", share, "share", f"{n:,} positions", "", model,
               "evaluation_results", "STS1-STS15_LAN_v3", "solution_ranking", both_protocols=True)
    )  # fmt: skip
    return rows


def piece_value_figures(published: dict) -> list[Figure]:
    """Team 44's average piece values (TEAM44, pawn = 1) as rows, on both protocols."""
    return [
        Figure("Team 44", f"average {piece} value, pawn = 1", value, "count", "", "their test positions",
               TEAM44_MODEL, "evaluation_results", "piece_values", f"value_{piece}", both_protocols=True)
        for piece, value in published.items()
    ]  # fmt: skip
