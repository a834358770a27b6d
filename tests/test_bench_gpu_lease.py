"""benchmarks/gpu_lease.sh in its tiny mode on CPU, on small synthetic splits: the six files a
lease brings back, and checkpoints the grid's evaluator plays, without the optimizer's state."""

import os
import subprocess
import sys
from pathlib import Path

import chess
import pytest
import torch

from pipeline.store.store import Store
from tests.training.synthetic import write_dataset

ROOT = Path(__file__).resolve().parent.parent


def _lease(tmp_path: Path, datasets: tuple[str, ...]) -> tuple[subprocess.CompletedProcess, Path]:
    """The script in its tiny mode on a store of synthetic `datasets`; its run and its OUT."""
    st = Store(tmp_path / "store")
    for name in datasets:
        write_dataset(st, name, games=20, seed=5)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PY": sys.executable, "STORE": str(st.root), "TINY": "1"}
    script = ROOT / "benchmarks" / "gpu_lease.sh"
    return subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True), out


@pytest.mark.slow  # about 20 s of CPU: three trainings and the loader table
def test_the_lease_script_brings_back_its_figures_and_playable_checkpoints(tmp_path):
    from training.evaluator import load_evaluator

    run, out = _lease(tmp_path, ("sabatelli_3class", "sabatelli_regression"))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "cnn_bitmap_3class.json",
        "cnn_bitmap_3class.pt",
        "cnn_bitmap_regression.pt",
        "gpu.json",
        "log.txt",
        "mlp_bitmap_3class.json",
    ]
    assert (out / "log.txt").read_text().rstrip().endswith("== done")
    for stem, dataset in (("cnn_bitmap_regression", "sabatelli_regression"), ("cnn_bitmap_3class", "sabatelli_3class")):
        ck = torch.load(out / f"{stem}.pt", weights_only=False)
        assert "optimizer" not in ck and ck["best_model"] and ck["config"]["dataset"] == dataset
        evaluator = load_evaluator(out / f"{stem}.pt")
        assert evaluator.name == f"cnn_bitmap768_{dataset}"
        assert evaluator.evaluate([chess.Board()]).shape == (1,)


@pytest.mark.slow  # about 15 s of CPU
def test_a_failing_step_is_named_and_the_others_still_use_the_lease(tmp_path):
    """No sabatelli_regression in the store: the first step fails, the 3-class steps still run and
    bring back their files, the log names the failed step, and the exit status says so."""
    run, out = _lease(tmp_path, ("sabatelli_3class",))
    assert run.returncode == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "cnn_bitmap_3class.json",
        "cnn_bitmap_3class.pt",
        "gpu.json",
        "log.txt",
        "mlp_bitmap_3class.json",
    ]
    log = (out / "log.txt").read_text()
    assert "cnn on sabatelli_regression FAILED (exit 1)" in log
    assert "gpu_full 3-class: " in log and "gpu.py: " in log
    assert log.rstrip().endswith("== failed: cnn on sabatelli_regression")
