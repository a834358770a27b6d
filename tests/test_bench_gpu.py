"""benchmarks/gpu.py in its tiny mode on a small real store: it runs on CPU (CUDA when present)
and reports every figure it promises."""

import json

import pytest
import torch

from tests.stores import depth1_dataset_store
from training.encoders import ENCODERS


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, stockfish, fics_2022):
    """The first 16 games of a real FICS archive, labelled at depth 1 (fast), as sabatelli_3class."""
    return depth1_dataset_store(tmp_path_factory.mktemp("gpu"), fics_2022, stockfish)


def test_the_gpu_benchmark_reports_loader_steps_speedup_and_accuracy(small_store, tmp_path, capsys):
    from benchmarks import gpu

    out = tmp_path / "gpu.json"
    threads = torch.get_num_threads()
    try:
        gpu.main(["--home", str(small_store.root), "--tiny", "--json", str(out)])
    finally:
        torch.set_num_threads(threads)
    report = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert report["device"] == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else report["device"])
    assert "no CUDA device" in report["device"] or torch.cuda.is_available()
    # Every position encoder of the MLP: both rates measured.
    assert set(report["encoders"]) == set(ENCODERS) - set(gpu.NOT_MLP_INPUTS)
    for rates in report["encoders"].values():
        assert rates["loader_positions_per_second"] > 0 and rates["step_positions_per_second"] > 0
    run = report["training"]["mlp3"]
    for side in ("cpu2", "device"):
        assert 0 <= run[side]["test_accuracy"] <= 1 and run[side]["test_rows"] > 0
        assert run[side]["train_positions_per_second"] > 0 and run[side]["epochs"] == 1
        assert run[side]["material_baseline_accuracy"] is not None
    assert run["speedup_wall"] > 0 and run["noise_95"] > 0
    assert run["within_noise"] == (abs(run["accuracy_difference"]) <= run["noise_95"])
    assert "left out: one input per piece" in printed and "speed-up" in printed
