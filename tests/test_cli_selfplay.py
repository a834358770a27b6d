"""`chess-pipeline selfplay`: generations through Dagster, their games ingested, bad flags in one line."""

import duckdb
import pytest

from assets.cli import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


def test_selfplay_writes_generations_and_ingests_their_games(home, capsys):
    flags = ["--games", "3", "--depth", "1", "--max-plies", "24", "--curve-games", "2", "--workers", "1"]
    main(["--home", str(home), "selfplay", "--generations", "2", *flags])
    out = capsys.readouterr().out
    assert "| 1 | 3 |" in out and "| 2 | 3 |" in out and "positions searched/s" in out
    assert (home / "selfplay" / "td" / "gen-0002.pt").exists()
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT archive, source, count(*) FROM games GROUP BY ALL ORDER BY 1").fetchall()
    assert [(source, n) for _, source, n in rows] == [("selfplay", 3), ("selfplay", 3)]
    assert rows[0][0].startswith("selfplay__td__gen-0001.pgn")


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--learner", "tdleaf"], "invalid choice: 'tdleaf' (choose from 'td_leaf', 'td_lambda')"),
        (["--model", "cnn"], "invalid choice: 'cnn' (choose from 'linear', 'network')"),
        (["--name", "../up"], "name '../up': use letters, digits"),
        (["--depth", "0"], "depth must be at least 1"),
    ],
)
def test_bad_selfplay_settings_are_one_line(home, capsys, flags, expected):
    with pytest.raises(SystemExit) as e:
        main(["--home", str(home), "selfplay", *flags])
    err = capsys.readouterr().err + str(e.value.code)
    assert expected in err and "Traceback" not in err
    assert not (home / "selfplay").exists()
