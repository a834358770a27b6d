"""`chess-pipeline report model_baselines`: each model's newest test figures beside its baselines."""

import time

import pytest

from cli.query import run_report
from pipeline.play.evaluation import write_model_metrics
from pipeline.store.duck import create_views
from pipeline.store.store import Store


def test_the_report_shows_each_models_newest_run_beside_its_baselines(tmp_path):
    store = Store(tmp_path / "store").ensure()
    old = [("test", "accuracy", 0.5), ("test", "majority_class_accuracy", 0.7), ("test", "rows", 100.0)]
    write_model_metrics(store, "mlp_bitmap_3class", "sabatelli_3class", "old", old)
    time.sleep(0.01)  # the newer run by materialised_at
    new = [
        ("test", "accuracy", 0.767),
        ("test", "majority_class_accuracy", 0.7402),
        ("test", "material_baseline_accuracy", 0.8122),
        ("test", "rows", 17510.0),
        ("val", "accuracy", 0.9),  # not a test figure
    ]
    write_model_metrics(store, "mlp_bitmap_3class", "sabatelli_3class", "new", new)
    regression = [
        ("test", "mse", 0.010),
        ("test", "mean_baseline_mse", 0.020),
        ("test", "material_baseline_mse", 0.012),
        ("test", "rows", 50.0),
    ]
    write_model_metrics(store, "mlp_bitmap_regression", "sabatelli_regression", "r", regression)
    create_views(store)
    rows = {r["model"]: r for r in run_report(store, "model_baselines").to_pylist()}
    mlp = rows["mlp_bitmap_3class"]
    assert (mlp["test_rows"], mlp["accuracy_pct"], mlp["majority_class_pct"], mlp["material_rule_pct"]) == (
        17510,
        76.7,
        74.02,
        81.22,
    )
    assert mlp["lead_pct"] == pytest.approx(76.7 - 81.22)  # behind the better baseline
    reg = rows["mlp_bitmap_regression"]
    assert (reg["mse"], reg["train_mean_mse"], reg["material_line_mse"]) == (0.01, 0.02, 0.012)
    assert reg["lead_mse"] == pytest.approx(0.002)  # ahead of the material line by this much
