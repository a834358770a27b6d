"""The reproduction report's table, from hand-made inputs (no store, no engine)."""

import pytest

from pipeline.research.published import (
    EVALUATION_FIGURES,
    MODEL_FIGURES,
    anchor,
    deepchess_figures,
    piece_value_figures,
)
from pipeline.research.reproduction import Ours, ReportInputs, Step, hms, on_published_split, render


def _rows(text: str) -> list[list[str]]:
    table = text.split("## Published figures beside ours", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")][1:]


def test_one_row_per_figure_with_both_protocols_beside_the_published_one():
    mlp = MODEL_FIGURES["mlp_bitmap_3class"]
    figures = [mlp, MODEL_FIGURES["mlp_algebraic_3class"], *EVALUATION_FIGURES[:1]]
    ours = {
        (on_published_split("mlp_bitmap_3class"), "model_metrics", "test", "accuracy"): Ours(0.8451, 1234),
        ("mlp_bitmap_3class", "model_metrics", "test", "accuracy"): Ours(0.7352, 1100),
        ("mlp_bitmap_3class", "evaluation_results", "kaufman", "avg_delta_pawns_1ply"): Ours(2.5, 25),
    }
    sizes = {"mlp_bitmap_3class": "full profile, 10 train rows; smaller than published: at most 2 epochs"}
    text = render(ReportInputs(figures, ours, sizes, [Step("labels", 75.0, "materialised")], {"profile": "full"}))
    rows = _rows(text)
    assert len(rows) == 3
    assert rows[0][3] == "96.07%" and rows[0][6:10] == ["84.51%", "1,234", "73.52%", "1,100"]
    assert "at most 2 epochs" in rows[0][10]
    assert rows[1][3] == "lower than bitmap" and rows[1][6] == "not measured" and rows[1][10] == "not trained"
    assert rows[2][3] == "1.56 pawns" and rows[2][6] == "-" and rows[2][8] == "2.50 pawns"  # no split column
    assert "| labels | materialised | 1m 15s |" in text


def test_published_figures_come_from_one_place():
    # The model assets' anchors and the evaluation rows' detail are made from these figures.
    from pipeline.play.evaluation import KAUFMAN_ANCHOR

    assert "96.07%" in anchor("mlp_bitmap_3class") and anchor("no_such_model") == ""
    assert "1.56" in KAUFMAN_ANCHOR and "2 of 25" in KAUFMAN_ANCHOR
    dc = deepchess_figures({"train_pair_accuracy": 0.9, "val_pair_accuracy": 0.8, "sts_points": (1160, 15000),
                            "sts_solution_ranking": (0.6, 10)}, {"A": (0.7, 5)})  # fmt: skip
    assert [f.text() for f in dc] == ["90.00%", "80.00%", "70.00%", "1160", "60.00%"]
    assert [f.metric for f in piece_value_figures({"knight": 2.94})] == ["value_knight"]


def test_hms():
    assert hms(None) == "-" and hms(59.6) == "1m 00s" and hms(3725) == "1h 02m 05s"


# `chess-pipeline reproduce`'s settings, without a store or an engine.


def _trained(cfg, model: str):
    """The TrainConfig the reproduce command's run config gives the model."""
    from assets.training import train_config
    from cli.reproduce_steps import op_configs

    run = op_configs(cfg, [model], {}, [model])[model]
    return train_config(model, run, "", "")


def _profile(model: str, profile: str):
    from assets.training import TrainRunConfig, train_config

    return train_config(model, TrainRunConfig(profile=profile), "", "")


@pytest.mark.parametrize(
    "model, profile, caps",
    [
        ("mlp_bitmap_3class", "quick", {"epochs": 10, "max_train_rows": 10**9}),  # above: the profile's
        ("mlp_counts_3class", "quick", {"epochs": 6, "max_train_rows": 1_000}),  # below: the cap
        ("mlp_bitmap_3class", "full", {"epochs": 3, "max_train_rows": 5_000}),  # full: every row
        ("mlp_bitmap_3class", "quick", {"max_train_rows": 0}),  # 0 rows: no bound, so no cap: the profile's
        ("mlp_bitmap_3class", "quick", {}),  # no cap: the profile's
    ],
)
def test_max_epochs_and_rows_cap_each_models_profile_never_raise_it(model, profile, caps):
    from cli.reproduce_config import ReproduceConfig
    from training.config import ScheduleOverrides

    got = _trained(ReproduceConfig(profile=profile, caps=ScheduleOverrides(**caps)), model)
    own = _profile(model, profile)
    want_epochs = min(own.epochs, caps.get("epochs", own.epochs))
    rows = caps.get("max_train_rows", 0)
    want_rows = own.max_train_rows if not rows else min(own.max_train_rows or rows, rows)
    assert (got.epochs, got.max_train_rows) == (want_epochs, want_rows)
    assert got.epochs <= own.epochs and (own.max_train_rows == 0 or 0 < got.max_train_rows <= own.max_train_rows)


@pytest.mark.parametrize(
    "flag, value, words",
    [
        ("--max-epochs", "0", "--max-epochs must be 1 or more"),
        ("--max-train-rows", "-1", "--max-train-rows must be 0 (all) or a number of rows"),
        ("--openings", "-3", "--openings must be 0 or more"),
        ("--workers", "-1", "--workers must be 0 or more"),
        ("--depth", "0", "--depth: depth limit must be at least 1, got 0"),
    ],
)
def test_bad_numbers_are_refused_in_one_line_before_any_store_work(tmp_path, monkeypatch, flag, value, words):
    from cli.app import main

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.pgn").write_text("")
    home = tmp_path / "store"
    argv = ["--home", str(home), "reproduce", "--data", str(tmp_path / "data"), "--suites", str(tmp_path), flag, value]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert words in str(e.value) and f"got {value}" in str(e.value) and "\n" not in str(e.value)
    assert not home.exists() and not (tmp_path / "dagster").exists()


def test_each_models_schedule_is_its_own():
    from cli.reproduce_config import ReproduceConfig, bounds_text, schedule_text
    from training.config import ScheduleOverrides

    quick = ReproduceConfig(profile="quick")
    for model in ("mlp_bitmap_3class", "mlp_counts_3class", "deepchess_net"):
        own = _profile(model, "quick")
        text = schedule_text(quick, model)
        assert f"at most {own.epochs} epoch(s)" in text and f"{own.max_minutes:g} minutes" in text, text
    assert schedule_text(quick, "mlp_counts_3class") != schedule_text(quick, "mlp_bitmap_3class")
    assert "at most 2 epoch(s)" in schedule_text(
        ReproduceConfig(profile="quick", caps=ScheduleOverrides(epochs=2)), "mlp_counts_3class"
    )
    assert bounds_text(quick) == "none"  # no hard-coded profile sizes in the run's bounds


def test_a_change_of_suites_folder_changes_the_evaluations_fingerprint_only(tmp_path):
    from cli.reproduce_config import ReproduceConfig, settings_text

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = ReproduceConfig(suites=str(tmp_path / "a")), ReproduceConfig(suites=str(tmp_path / "b"))
    assert settings_text(a, "evaluation") != settings_text(b, "evaluation")
    assert settings_text(a, "evaluation") == settings_text(
        ReproduceConfig(suites=str(tmp_path / "b" / ".." / "a")), "evaluation"
    )
    for kind in ("dataset", "model"):  # the datasets and the models are kept
        assert settings_text(a, kind) == settings_text(b, kind)


def test_each_step_is_kept_under_its_own_settings():
    """A new time budget or epoch cap retrains and keeps the datasets and the evaluation settings;
    new labels redo the datasets (and, through their inputs, what is downstream)."""
    from assets.reproduce import job_assets
    from cli.reproduce_config import ReproduceConfig, settings_text, step_kind
    from pipeline.datasets.datasets import DATASETS
    from pipeline.labels.uci import Limit
    from training.config import ScheduleOverrides

    base = ReproduceConfig(profile="full")
    for other in (
        ReproduceConfig(profile="full", hours=8.0),
        ReproduceConfig(profile="full", caps=ScheduleOverrides(epochs=3)),
    ):
        assert settings_text(base, "model") != settings_text(other, "model")
        assert settings_text(base, "dataset") == settings_text(other, "dataset")
        assert settings_text(base, "evaluation") == settings_text(other, "evaluation")
    static = ReproduceConfig(profile="full", label=Limit("static"))
    assert settings_text(base, "dataset") != settings_text(static, "dataset")
    names = job_assets(stages=("ours",))  # the optional stage holds elo_ratings
    kinds = {n: step_kind(n) for n in names}
    datasets = [n for n, k in kinds.items() if k == "dataset"]
    assert datasets and all(n.removeprefix("published_split_") in DATASETS for n in datasets)
    assert {"mlp_bitmap_3class", "published_split_deepchess_net", "model_results"} <= {
        n for n, k in kinds.items() if k == "model"
    }
    assert kinds["eval_suites_mlp_bitmap_3class"] == kinds["elo_ratings"] == "evaluation"
    with pytest.raises(ValueError, match="step kind must be one of"):
        settings_text(base, "report")


def test_quick_eval_plays_a_small_lubeck_grid():
    from assets.reproduce import LUBECK_GRID
    from cli.reproduce_config import ReproduceConfig
    from cli.reproduce_steps import op_configs
    from pipeline.play.lubeck_grid import GridConfig

    quick = op_configs(ReproduceConfig(quick_eval=True), [LUBECK_GRID], {}, [])[LUBECK_GRID].to_dataclass(GridConfig)
    full = GridConfig()
    cells = len(quick.depths) * len(quick.seconds) * quick.positions
    assert cells * 4 <= len(full.depths) * len(full.seconds) * full.positions
    assert quick.positions == 2 and quick.depths == (2,) and quick.seconds == (1.0,)


def test_a_step_that_failed_this_run_shows_failed_not_its_older_materialisation():
    import dagster as dg

    from assets.reproduce import _step

    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization("sabatelli_3class"))
        assert _step(instance, "sabatelli_3class").status == "materialised"
        failed = _step(instance, "sabatelli_3class", "failed: boom")
        assert (failed.status, failed.seconds, failed.detail) == ("failed", None, "boom")
        assert _step(instance, "mlp_bitmap_3class", "skipped: sabatelli_3class failed").status == "skipped"
        assert _step(instance, "sabatelli_3class", "kept").status == "kept"
        assert _step(instance, "labels", "done").status == "done"


def test_model_and_selfplay_anchors_are_formatted_from_the_published_dicts():
    from pathlib import Path

    import assets.selfplay
    import assets.training
    from assets.training import MODELS
    from pipeline.research.published import DEEPCHESS, HUI_RANDOM_PEAK, TEAM44, deepchess_anchor, piece_value_anchor

    assert MODELS["piece_value_net"].anchor == piece_value_anchor(TEAM44)
    assert f"knight {TEAM44['knight']:.2f}" in MODELS["piece_value_net"].anchor
    assert MODELS["deepchess_net"].anchor == deepchess_anchor(DEEPCHESS)
    assert f"{DEEPCHESS['val_pair_accuracy']:.2%}" in MODELS["deepchess_net"].anchor
    assert piece_value_anchor({"knight": 3.0}) == "Team 44: knight 3.00 (pawn = 1)"
    assert f"peak {HUI_RANDOM_PEAK:.0%}" in assets.selfplay.PUBLISHED_RANDOM
    # No figure typed a second time in the asset modules.
    for module, figures in ((assets.training, ("2.94", "9.87", "96.68", "96.74")), (assets.selfplay, ("79.8", "84%"))):
        source = Path(module.__file__).read_text()
        assert not [f for f in figures if f in source], module.__name__
    # Nor DeepChess's buckets outside pipeline/research/published.py (read as text: no torch imported).
    root = Path(assets.training.__file__).resolve().parents[1]
    for path in ("training/deepchess.py", "assets/deepchess.py", "assets/reproduce.py"):
        source = (root / path).read_text()
        assert not [f for f in ("0.6937", "108_780", "0.9585", "112_406") if f in source], path


def test_deepchess_and_team44_figures_have_ours_on_both_protocols_beside_them():
    from pipeline.research.published import DEEPCHESS, DEEPCHESS_BUCKETS, PAIRS_ON_PUBLISHED_SPLIT, SPLIT_MODELS, TEAM44

    dc = {f.measure: f for f in deepchess_figures(DEEPCHESS, DEEPCHESS_BUCKETS)}
    val, bucket = dc["pair accuracy, validation"], dc["Experiment 1, bucket A_even_even"]
    points, ranking = dc["STS points, 1-ply round robin"], dc["STS solution ranking"]
    knight = piece_value_figures(TEAM44)[0]
    assert {"deepchess_net", "piece_value_net"} <= set(SPLIT_MODELS)
    split = on_published_split
    ours = {
        (split("deepchess_net"), "model_metrics", "val", "accuracy"): Ours(0.81, 3597),
        ("deepchess_net", "model_metrics", "val", "accuracy"): Ours(0.73, 3841),
        (split("deepchess_net"), "evaluation_results", "deepchess_pairs", "A_even_even"): Ours(0.66, 120),
        ("deepchess_net", "evaluation_results", "deepchess_pairs", "A_even_even"): Ours(0.61, 110),
        (split("deepchess_net"), "evaluation_results", "STS1-STS15_LAN_v3", "points_1ply"): Ours(900, 1500),
        ("deepchess_net", "evaluation_results", "STS1-STS15_LAN_v3", "points_1ply"): Ours(800, 1500),
        (split("piece_value_net"), "evaluation_results", "piece_values", "value_knight"): Ours(3.1, 4000),
        ("piece_value_net", "evaluation_results", "piece_values", "value_knight"): Ours(2.8, 4000),
    }
    figures = [val, bucket, points, ranking, knight]
    text = render(ReportInputs(figures, ours, {}, [], {}))
    rows = _rows(text)
    assert rows[0][6:10] == ["81.00%", "3,597", "73.00%", "3,841"]
    assert rows[1][6:10] == ["66.00%", "120", "61.00%", "110"]
    assert rows[2][6:8] == ["-", "-"] and rows[2][8] == "800"  # STS points: the leakage-free model's only
    assert rows[3][6] == "not measured"  # measured on both protocols, none stored here
    assert rows[4][3] == "2.94" and rows[4][6:10] == ["3.1", "4,000", "2.8", "4,000"]
    assert PAIRS_ON_PUBLISHED_SPLIT in text and "a game can have positions on both sides" in text


def test_the_default_folders_are_the_shared_data_beside_the_repository():
    """docs/usage/reproduce.md: with no --data / --suites, reproduce reads ../shared/data/pgn and
    ../shared/data/epd, beside the repository's root (wherever the CLI's module lies in it)."""
    from pathlib import Path

    from cli.reproduce_config import ReproduceConfig

    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    assert (ReproduceConfig().data, ReproduceConfig().suites) == (str(shared / "pgn"), str(shared / "epd"))


def test_the_demo_reads_the_same_shared_data_as_reproduce():
    """docs/usage/demo.md: the demo's --data and --suites default to ../shared/data beside the
    repository, the one folder reproduce reads too (a move of cli/ left the demo's pointing at
    /shared/data)."""
    from pathlib import Path

    from cli.demo import DemoConfig
    from cli.reproduce_config import ReproduceConfig

    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    assert (DemoConfig().data, DemoConfig().suites) == (str(shared / "pgn"), str(shared / "epd"))
    assert (DemoConfig().data, DemoConfig().suites) == (ReproduceConfig().data, ReproduceConfig().suites)


def test_deepchess_pair_accuracy_row_prints_its_interval_by_game_from_the_store(tmp_path):
    """The val pair accuracy's interval (model_metrics' accuracy_low95 / _high95 beside it, as the
    model asset writes them) comes out of a real store into the row, on both protocols, with n."""
    from pipeline.play.evaluation import write_model_metrics
    from pipeline.research.published import DEEPCHESS, DEEPCHESS_BUCKETS
    from pipeline.research.reproduction import ours_from_store
    from pipeline.store.duck import memory_connection
    from pipeline.store.store import Store

    store = Store(tmp_path / "store").ensure()
    for model, (value, low, high, n) in {
        "deepchess_net": (0.73, 0.70, 0.76, 3841),
        on_published_split("deepchess_net"): (0.81, 0.785, 0.8325, 3597),
    }.items():
        rows = [("val", "accuracy", value), ("val", "accuracy_low95", low), ("val", "accuracy_high95", high)]
        write_model_metrics(store, model, "deepchess", "run1", [*rows, ("val", "rows", float(n))])
    val = {f.measure: f for f in deepchess_figures(DEEPCHESS, DEEPCHESS_BUCKETS)}["pair accuracy, validation"]
    with memory_connection(store) as con:
        ours = ours_from_store(con, [val], ["deepchess_net", on_published_split("deepchess_net")])
    assert ours[("deepchess_net", "model_metrics", "val", "accuracy")] == Ours(0.73, 3841, (0.70, 0.76))
    row = _rows(render(ReportInputs([val], ours, {}, [], {})))[0]
    assert row[6:10] == [
        "81.00% (95%: 78.50%-83.25%, n = 3,597)",
        "3,597",
        "73.00% (95%: 70.00%-76.00%, n = 3,841)",
        "3,841",
    ]
