"""benchmarks/gpu_full.py in its tiny mode on small synthetic splits: each model's figures land in
its own JSON as soon as it finishes, an unknown model is one line, and the piece-value network's
table comes with it."""

import json

import pytest

from pipeline.store.store import Store
from tests.training.synthetic import write_dataset


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("gpu_full"))
    for name in ("sabatelli_3class", "piece_values"):
        write_dataset(st, name, games=20, seed=5)
    return st.root


def test_each_model_writes_its_figures_and_a_bad_one_does_not_stop_the_rest(home, tmp_path, capsys):
    from benchmarks import gpu_full

    # deepchess_net's dataset is missing: it fails alone, the other still runs and writes.
    gpu_full.main(
        [
            "deepchess_net",
            "mlp_bitmap_3class",
            "--home",
            str(home),
            "--out",
            str(tmp_path),
            "--tiny",
            "--device",
            "cpu",
        ]
    )
    printed = capsys.readouterr().out
    mlp = json.loads((tmp_path / "mlp_bitmap_3class.json").read_text())
    assert mlp["config"]["dataset"] == "sabatelli_3class" and mlp["config"]["patience"] == 5  # the full profile's
    assert mlp["epochs_run"] == 1 and 0 <= mlp["test"]["accuracy"] <= 1 and mlp["rows"]["train"] > 0
    assert "material_baseline_accuracy" in mlp["test"] and "mlp_bitmap_3class: test accuracy" in printed
    assert not (tmp_path / "deepchess_net.json").exists() and "deepchess_net failed" in printed


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_the_piece_value_network_comes_with_its_table(home, tmp_path, capsys):
    from benchmarks import gpu_full

    gpu_full.main(["piece_value_net", "--home", str(home), "--out", str(tmp_path), "--tiny", "--device", "cpu"])
    assert "N/B/R/Q" in capsys.readouterr().out
    pv = json.loads((tmp_path / "piece_value_net.json").read_text())
    assert pv["config"]["pretrain_epochs"] == 1 and "mse" in pv["test"]
    assert set(pv["piece_values"]["relative"]) >= {"pawn", "knight", "bishop", "rook", "queen"}
    assert pv["piece_values"]["relative"]["pawn"] == pytest.approx(1.0)


def test_an_unknown_model_is_one_line(home, tmp_path, capsys):
    from benchmarks import gpu_full

    with pytest.raises(SystemExit):
        gpu_full.main(["no_such_net", "--home", str(home), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert "unknown model(s) ['no_such_net']" in err[-1] and "mlp_bitmap_3class" in err[-1]
