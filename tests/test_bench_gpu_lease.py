"""benchmarks/gpu_lease.sh in its tiny mode on CPU, on small synthetic splits: the six files a
lease brings back, and checkpoints the grid's evaluator plays, without the optimizer's state."""

import os
import subprocess
import sys
from pathlib import Path

import chess
import pytest
import torch

from pipeline.store import Store
from tests.training.synthetic import write_dataset

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # about 20 s of CPU: three trainings and the loader table
def test_the_lease_script_brings_back_its_figures_and_playable_checkpoints(tmp_path):
    from training.evaluator import load_evaluator

    st = Store(tmp_path / "store")
    for name in ("sabatelli_3class", "sabatelli_regression"):
        write_dataset(st, name, games=20, seed=5)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PY": sys.executable, "STORE": str(st.root), "TINY": "1"}
    run = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_lease.sh")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == [
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
