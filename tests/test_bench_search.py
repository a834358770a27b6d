"""benchmarks/search.py with an MLP checkpoint (synthetic data, no Stockfish): the numpy MLP is
timed against the same network in torch and the traditional evaluation (the latter also through
the store's encoding), and all choose as they should."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.store.store import Store
from tests.training.conftest import QUIET
from tests.training.synthetic import write_dataset
from training.train import TrainConfig, train

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "search.py"


def test_the_numpy_mlp_is_timed_against_torch_with_the_same_moves(tmp_path):
    store = Store(tmp_path / "store")
    write_dataset(store, "sabatelli_3class", games=20, seed=1)
    r = train(
        TrainConfig(store=str(store.root), model="mlp3", hidden=(32,), epochs=1, out=str(tmp_path / "run")), log=QUIET
    )
    args = ["--checkpoint", str(r.checkpoint), "--positions", "3", "--depth", "2", "--quiescence", "2"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    assert "(numpy): batched" in out and "(torch): batched" in out
    costs = re.findall(r"([\d.]+)x the traditional evaluation's cost a node", out)
    assert len(costs) == 2 and all(float(c) > 0 for c in costs)
    assert re.search(r"numpy over torch: [\d.]+x \(3/3 same moves\)", out), out
    # the store's encoding, the lean encoding's baseline, plays the same moves
    assert re.search(r"board_bits over the store's encoding: [\d.]+x \(3/3 same moves\)", out), out
