"""The line `chess-pipeline train` prints for each model (cli.train.ModelSummary): a regression
model's lead over the material line comes with its 95% interval, as a classifier's over the rule."""

from assets.records import ModelMetadata
from cli.train import ModelSummary

RUN = dict(checkpoint="models/m/run/checkpoint.pt", model="preset", device="cpu", epochs=10, seconds=2100.0,
           train_positions_per_second=2800, rows_train=584234, rows_test=82405, published="none (ours)")  # fmt: skip


def test_a_regression_line_gives_the_lead_over_the_material_line_and_its_interval():
    m = ModelMetadata(dataset="sabatelli_regression", test_mse=0.00119, test_cp_mae=70.5, mean_baseline_mse=0.00598,
                      material_baseline_mse=0.00236, material_line_lead=0.00117, material_line_lead_ci95=0.00003,
                      **RUN)  # fmt: skip
    line = ModelSummary("mlp_bitmap_regression_regularised", m).line()
    assert "test MSE 0.00119 (train mean 0.00598, material line 0.00236, lead +0.00117 +/- 0.00003), cp MAE 70" in line


def test_a_run_from_before_the_interval_gives_the_two_errors_alone():
    m = ModelMetadata(dataset="sabatelli_regression", test_mse=0.00809, mean_baseline_mse=0.009,
                      material_baseline_mse=0.00596, **RUN)  # fmt: skip
    line = ModelSummary("mlp_bitmap_regression", m).line()
    assert "test MSE 0.00809 (train mean 0.00900, material line 0.00596) on 82,405 test positions" in line


def test_a_classifier_line_gives_its_lead_over_the_material_rule():
    m = ModelMetadata(dataset="sabatelli_3class", test_accuracy=0.8911, majority_class_accuracy=0.6859,
                      material_baseline_accuracy=0.8235, material_lead=0.0676, material_lead_ci95=0.0081,
                      **RUN)  # fmt: skip
    line = ModelSummary("cnn_bitmap_3class_regularised", m).line()
    assert "test accuracy 89.11% (majority class 68.59%, material rule 82.35%, lead +6.76% +/- 0.81%)" in line
