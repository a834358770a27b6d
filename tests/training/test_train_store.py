"""`python -m training.train` without --store trains from the CLI's store: $CHESS_PIPELINE_HOME, else ./store."""

import pytest

from training.train import TrainConfig, main, train


def test_default_store_is_chess_pipeline_home_read_when_the_run_starts(tmp_path, monkeypatch):
    home, elsewhere = tmp_path / "home", tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = TrainConfig(dataset="sabatelli_3class")  # made before the variable is set: read when the run starts
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(home))
    with pytest.raises(FileNotFoundError) as e:
        train(cfg, log=lambda s: None)
    assert str(e.value).startswith(f"{home}/datasets/sabatelli_3class/train.parquet not found")
    with pytest.raises(FileNotFoundError) as e:
        main(["--dataset", "sabatelli_3class", "--epochs", "1"])
    assert str(e.value).startswith(f"{home}/datasets/sabatelli_3class/train.parquet not found")


def test_without_chess_pipeline_home_the_store_is_store_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        train(TrainConfig(dataset="sabatelli_3class"), log=lambda s: None)
    assert str(e.value).startswith(f"{tmp_path.resolve()}/store/datasets/sabatelli_3class/train.parquet not found")
