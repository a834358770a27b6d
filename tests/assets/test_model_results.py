"""The model results table (asset model_results) in a real Dagster instance: each model's newest test
figures, its lead over material with the interval, the rows sorted by that lead."""

import dagster as dg

from assets.resources import StoreResource
from assets.training import model_results
from pipeline.play.evaluation import write_model_metrics
from pipeline.store.store import Store
from training.catalog import MODELS


def _write(store: Store, name: str, run: str, **test: float) -> None:
    """One run's test figures of model `name` into model_metrics."""
    rows = [("test", metric, value) for metric, value in test.items()]
    write_model_metrics(store, name, MODELS[name].dataset, run, rows)


def test_rows_carry_the_lead_over_material_and_are_sorted_by_it(instance, tmp_path):
    store = Store(tmp_path / "store").ensure()
    leads = {"mlp_bitmap_3class": (0.8234, 0.8298, -0.0064, 0.0161), "deepchess_net": (0.7620, 0.7147, 0.0473, 0.0208)}
    for name, (accuracy, material, lead, ci) in leads.items():
        _write(store, name, "run1", accuracy=accuracy, material_baseline_accuracy=material, material_lead=lead,
               material_lead_ci95=ci, rows=1000.0)  # fmt: skip
    # a newer run of the MLP: its figures replace the older ones
    _write(store, "mlp_bitmap_3class", "run2", accuracy=0.8945, material_baseline_accuracy=0.8235,
           material_lead=0.0710, material_lead_ci95=0.0081, rows=82405.0)  # fmt: skip
    _write(store, "mlp_bitmap_regression", "run1", mse=0.00125, material_baseline_mse=0.00209, rows=500.0)
    _write(store, "mlp_bitmap_regression_regularised", "run1", mse=0.00119, material_baseline_mse=0.00236,
           material_line_lead=0.00117, material_line_lead_ci95=0.00006, rows=82405.0)  # fmt: skip
    result = dg.materialize(
        [model_results], instance=instance, resources={"store": StoreResource(root=str(store.root))}
    )
    assert result.success
    table = (store.root / "reports" / "model_results.md").read_text()
    body = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| model ")]
    names = [line.split(" | ")[0].removeprefix("| ") for line in body]
    assert names[:2] == ["mlp_bitmap_3class", "deepchess_net"]  # +7.10 before +4.73
    assert set(names) == set(MODELS)  # then every other model, once
    assert "| 89.45% accuracy | - | 82.35% | +7.10% +/- 0.81% |" in body[0]
    assert "| 76.20% accuracy | - | 71.47% | +4.73% +/- 2.08% |" in body[1]
    regression = next(line for line in body if line.startswith("| mlp_bitmap_regression "))
    assert "MSE +0.00084 (the line's less ours)" in regression  # a run from before the interval
    regularised = next(line for line in body if line.startswith("| mlp_bitmap_regression_regularised "))
    assert "| MSE 0.0012 | - | MSE 0.0024 (line) | MSE +0.00117 +/- 0.00006 (the line's less ours) |" in regularised
    untrained = next(line for line in body if line.startswith("| lubeck_wdl_mlp "))
    assert "not trained yet" in untrained
